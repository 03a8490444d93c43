"""The LangChain / LangGraph names the adapter uses, imported in one place.

Reached through the package's exports, which first run ``ADAPTER.require()``: a missing
package fails there with the install command, not deep inside a hook.
"""

from __future__ import annotations

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, Tool
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

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
    "RunnableConfig",
    "Tool",
    "ToolCallRequest",
    "ToolMessage",
    "get_config",
]
