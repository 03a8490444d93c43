"""toolguard for Pydantic AI: one capability that checks, traces and counts every tool call.

    import toolguard as tg
    from toolguard_pydantic_ai import ToolGuard

    agent = Agent(model, tools=[...], capabilities=[ToolGuard(guard)])

Pydantic AI is imported when ``ToolGuard`` is first used, so importing this package never
fails; using it without Pydantic AI raises an ImportError that names the install command.
"""

from typing import TYPE_CHECKING

import toolguard as tg

if TYPE_CHECKING:
    from ._capability import ToolGuard

# The one place the supported range is written: pyproject.toml's dependencies mirror it
# (tests/test_adapter_declaration.py). Checked when ToolGuard is first used.
ADAPTER = tg.Adapter(
    "toolguard-pydantic-ai",
    requires={"pydantic_ai": "pydantic-ai-slim>=2.68,<3"},
    install="pip install -e . -e adapters/pydantic_ai",
)
__version__ = ADAPTER.version

__getattr__, __dir__ = ADAPTER.exports({"ToolGuard": "._capability"})

__all__ = ["ADAPTER", "ToolGuard", "__version__"]
