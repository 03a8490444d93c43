"""toolguard for Google ADK: one plugin that checks, traces and counts every tool call.

    import toolguard as tg
    from toolguard_google_adk import ToolGuardPlugin

    runner = InMemoryRunner(agent=agent, plugins=[ToolGuardPlugin(guard)])

Google ADK is imported when ``ToolGuardPlugin`` is first used, so importing this package never
fails; using it without ADK raises an ImportError that names the install command.
"""

from typing import TYPE_CHECKING

import toolguard as tg

if TYPE_CHECKING:
    from ._plugin import ToolGuardPlugin

# The one place the supported range is written: pyproject.toml's dependencies mirror it
# (tests/test_adapter_declaration.py). Checked when ToolGuardPlugin is first used.
ADAPTER = tg.Adapter(
    "toolguard-google-adk",
    requires={"google.adk": "google-adk>=2.13,<3"},
    install="pip install -e . -e adapters/google_adk",
)
__version__ = ADAPTER.version

__getattr__, __dir__ = ADAPTER.exports({"ToolGuardPlugin": "._plugin"})

__all__ = ["ADAPTER", "ToolGuardPlugin", "__version__"]
