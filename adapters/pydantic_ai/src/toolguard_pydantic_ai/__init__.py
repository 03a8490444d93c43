"""toolguard for Pydantic AI: one capability that checks, traces and counts every tool call.

    import toolguard as tg
    from toolguard_pydantic_ai import ToolGuard

    agent = Agent(model, tools=[...], capabilities=[ToolGuard(guard)])

Pydantic AI is imported when ``ToolGuard`` is first used, so importing this package never
fails; using it without Pydantic AI raises an ImportError that names the extra to install.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._capability import ToolGuard

__version__ = "0.1.0"

_INSTALL = "pip install 'toolguard-otel[pydantic-ai]'"


def __getattr__(name: str) -> object:
    if name != "ToolGuard":
        raise AttributeError(f"module 'toolguard_pydantic_ai' has no attribute {name!r}")
    try:
        from . import _capability
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "pydantic_ai":
            raise ImportError(
                f"toolguard_pydantic_ai.{name} needs Pydantic AI (pydantic-ai-slim 2.x): {_INSTALL}"
            ) from exc
        raise
    value = getattr(_capability, name)
    globals()[name] = value
    return value


__all__ = ["ToolGuard", "__version__"]
