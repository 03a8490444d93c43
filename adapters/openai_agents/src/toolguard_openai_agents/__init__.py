"""toolguard for the OpenAI Agents SDK.

``guard_agent(agent, guard)`` returns a clone of an ``Agent`` whose function tools the
``toolguard.Guard`` checks before they run (a blocked call's answer is the guard's message),
and whose model turns number their parallel calls in emission order. ``guarded_run`` (or
``run`` / ``run_sync``) makes one ``Runner.run`` one trajectory. The SDK is imported on first
use, so a missing SDK says which extra to install.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._agent import guard_agent
    from ._episode import guarded_run, run, run_sync
    from ._hooks import GuardHooks, reserve_turn
    from ._tools import guard_tool, guard_tools, guarded_by

__version__ = "0.1.0"

_LAZY = {
    "GuardHooks": "._hooks",
    "guard_agent": "._agent",
    "guard_tool": "._tools",
    "guard_tools": "._tools",
    "guarded_by": "._tools",
    "guarded_run": "._episode",
    "reserve_turn": "._hooks",
    "run": "._episode",
    "run_sync": "._episode",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolguard_openai_agents' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "GuardHooks",
    "__version__",
    "guard_agent",
    "guard_tool",
    "guard_tools",
    "guarded_by",
    "guarded_run",
    "reserve_turn",
    "run",
    "run_sync",
]
