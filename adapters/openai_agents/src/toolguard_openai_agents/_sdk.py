"""The one place the OpenAI Agents SDK is imported.

Reached through the package's exports, which first run ``ADAPTER.require()``: a missing SDK
fails there with the install command.
"""

from agents import (
    Agent,
    AgentHooks,
    FunctionTool,
    Handoff,
    ModelBehaviorError,
    ModelResponse,
    Runner,
    RunResult,
    RunState,
    Tool,
    ToolGuardrailFunctionOutput,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)
from agents.lifecycle import AgentHooksBase
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall

__all__ = [
    "Agent",
    "AgentHooks",
    "AgentHooksBase",
    "FunctionTool",
    "Handoff",
    "ModelBehaviorError",
    "ModelResponse",
    "ResponseFunctionToolCall",
    "RunResult",
    "RunState",
    "Runner",
    "Tool",
    "ToolContext",
    "ToolGuardrailFunctionOutput",
    "ToolOutputGuardrail",
    "ToolOutputGuardrailData",
]
