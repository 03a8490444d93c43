"""The one place the OpenAI Agents SDK is imported, so that its absence names the extra."""

try:
    import agents  # noqa: F401 - imported first: only its absence means "install the extra"
except ModuleNotFoundError as exc:
    raise ImportError(
        "toolguard_openai_agents needs the OpenAI Agents SDK (openai-agents>=0.24): "
        "pip install 'toolguard-otel[openai-agents]'"
    ) from exc

from agents import Agent, AgentHooks, FunctionTool, Handoff, ModelResponse, Runner, RunResult, Tool
from agents.lifecycle import AgentHooksBase
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall

__all__ = [
    "Agent",
    "AgentHooks",
    "AgentHooksBase",
    "FunctionTool",
    "Handoff",
    "ModelResponse",
    "ResponseFunctionToolCall",
    "RunResult",
    "Runner",
    "Tool",
    "ToolContext",
]
