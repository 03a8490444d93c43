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

import toolguard as tg

if TYPE_CHECKING:
    from ._contracts import declare_tool
    from ._middleware import STATE_KEY, ToolCallGuard, ToolGuardMiddleware

# The one place the supported range is written: pyproject.toml's dependencies mirror it
# (tests/test_adapter_declaration.py). Checked when a name below is first used.
ADAPTER = tg.Adapter(
    "toolguard-langchain",
    requires={
        "langchain": "langchain>=1.0,<2",
        "langgraph": "langgraph>=1.0,<2",
        "langchain_core": "langchain-core>=1.0,<2",
    },
    install="pip install -e . -e adapters/langchain",
)
__version__ = ADAPTER.version

__getattr__, __dir__ = ADAPTER.exports(
    {
        "STATE_KEY": "._middleware",
        "ToolCallGuard": "._middleware",
        "ToolGuardMiddleware": "._middleware",
        "declare_tool": "._contracts",
    }
)

__all__ = [
    "ADAPTER",
    "STATE_KEY",
    "ToolCallGuard",
    "ToolGuardMiddleware",
    "__version__",
    "declare_tool",
]
