"""The LangChain / LangGraph names the adapter uses, imported in one place.

Missing packages fail here with the install line, not deep inside a hook.
"""

from __future__ import annotations

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain.agents.middleware.types import PrivateStateAttr
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import BaseTool
    from langgraph.config import get_config
    from langgraph.errors import GraphBubbleUp, GraphInterrupt
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError(
        "toolguard_langchain needs LangChain v1 and LangGraph "
        f"({exc.name or exc} is missing): pip install 'toolguard-otel[langchain]'"
    ) from exc

__all__ = [
    "AIMessage",
    "AgentMiddleware",
    "AgentState",
    "BaseTool",
    "Command",
    "GraphBubbleUp",
    "GraphInterrupt",
    "HumanMessage",
    "PrivateStateAttr",
    "ToolCallRequest",
    "ToolMessage",
    "get_config",
]
