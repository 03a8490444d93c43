"""toolguard for LangChain v1 and LangGraph.

``ToolGuardMiddleware(guard)`` goes in ``create_agent(..., middleware=[...])``: every tool
call is checked before it runs, a rejection goes back to the model as an error
``ToolMessage``, and each ``agent.invoke`` / ``ainvoke`` is one trajectory. ``ToolCallGuard``
is the same without the episode hooks (the caller provides the trajectory; it adds no step to
the agent's graph); its ``wrap_tool_call`` / ``awrap_tool_call`` fit a plain ``ToolNode``.
``declare_tool(guard, tool, refs=..., ...)`` gives a LangChain tool its contract.

LangChain is imported on first use, so ``import toolguard_langchain`` alone never needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._contracts import declare_tool
    from ._middleware import STATE_KEY, ToolCallGuard, ToolGuardMiddleware

__version__ = "0.1.0"

_LAZY = {
    "STATE_KEY": "._middleware",
    "ToolCallGuard": "._middleware",
    "ToolGuardMiddleware": "._middleware",
    "declare_tool": "._contracts",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolguard_langchain' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = ["STATE_KEY", "ToolCallGuard", "ToolGuardMiddleware", "__version__", "declare_tool"]
