"""One model turn's tool calls: steps reserved in the order the model emitted them, and the
calls Pydantic AI refused before any hook saw them, found afterwards so T counts them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import toolguard as tg
from pydantic_ai import CallToolsNode, RunContext
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.tools import ToolDefinition

from . import _deferred

# Why Pydantic AI answered a call without running it (ToolReturnPart.retry.cause), as the
# check id and the reason for the span: never the arguments.
_REFUSED = {
    "unknown_tool": ("schema.tool", "no tool of that name"),
    "unavailable_tool": ("schema.tool", "the tool is not available yet"),
    "validation_error": ("schema.args", "its arguments failed validation"),
    "model_retry": ("schema.args", "its argument validator asked for a retry"),
}
_FAILED = ("schema.args", "its argument validator failed the call (ToolFailed)")


def turn_calls(
    ctx: RunContext[Any], node: CallToolsNode[Any, Any], traj: tg.Trajectory
) -> list[ToolCallPart]:
    """The calls of this turn that are the agent's tool calls: function tools, external
    tools (checked as they leave the run) and names Pydantic AI does not know. Output tools
    are the run's answer, not steps; a call of a tool requiring approval takes its step in
    the run that resumes it with the human's decision (_deferred.py)."""
    calls = node.model_response.tool_calls
    manager = ctx.tool_manager
    tools = manager.tools if manager is not None else None
    if node.tool_call_results is not None:
        return _deferred.decided(calls, node.tool_call_results, traj)
    if not calls or tools is None:
        return calls
    out = []
    for call in calls:
        tool = tools.get(call.tool_name)
        if tool is None or tool.tool_def.kind in ("function", "external"):
            out.append(call)
    return out


def refused(
    ctx: RunContext[Any],
    node_result: Any,
    calls: Iterable[ToolCallPart],
) -> Iterator[tuple[ToolCallPart, str, str]]:
    """(call, check id, message) for each of ``calls`` (ones no hook of the guard saw) that
    Pydantic AI answered without running: an unknown name, a tool not available yet,
    arguments it refused. A call skipped (a final result came first) or interrupted is none
    of these: the capability ends its reserved step as cancelled."""
    returns = _tool_returns(ctx, node_result)
    for call in calls:
        part = returns.get(call.tool_call_id)
        if part is None:
            if tool_def(ctx, call.tool_name) is None:
                # No answer at all: refused once too often, the run ended there.
                check, why = _REFUSED["unknown_tool"]
                yield call, check, _message(call.tool_name, why)
        elif part.outcome == "retried" and part.retry is not None:
            check, why = _REFUSED.get(part.retry.cause, _REFUSED["validation_error"])
            yield call, check, _message(call.tool_name, why)
        elif part.outcome == "failed":
            yield call, _FAILED[0], _message(call.tool_name, _FAILED[1])


def _message(name: str, why: str) -> str:
    shown = name if len(name) <= 128 else name[:128] + "…"
    return f"Pydantic AI refused the call to {shown!r}: {why}"


def tool_def(ctx: RunContext[Any], name: str) -> ToolDefinition | None:
    manager = ctx.tool_manager
    if manager is None:
        return None
    try:
        return manager.get_tool_def(name)
    except ValueError:  # not prepared for this step (never the case inside CallToolsNode)
        return None


def find_tool_def(
    ctx: RunContext[Any] | None, offered: list[ToolDefinition], name: str
) -> ToolDefinition | None:
    """The tool's definition from the turn's tool manager, else from the step's prepared
    tools: a resumed turn's tools are prepared inside it, after its context was made."""
    found = tool_def(ctx, name) if ctx is not None else None
    return found or next((d for d in offered if d.name == name), None)


def _tool_returns(ctx: RunContext[Any], node_result: Any) -> dict[str, ToolReturnPart]:
    # The answers are on the next request (a ModelRequestNode), or already in the history
    # when the run ended with this turn or was interrupted in it.
    # Only answers after this turn's response: call ids are unique within a turn only, and
    # an earlier turn's answer to the same id (call_0 again) is not this call's.
    requests: list[ModelRequest] = []
    request = getattr(node_result, "request", None)
    if isinstance(request, ModelRequest):
        requests.append(request)
    for message in reversed(ctx.messages[-2:]):
        if isinstance(message, ModelResponse):
            break
        if isinstance(message, ModelRequest):
            requests.append(message)
    out: dict[str, ToolReturnPart] = {}
    for request in requests:
        for part in request.parts:
            if isinstance(part, ToolReturnPart):
                out.setdefault(part.tool_call_id, part)
    return out
