"""Guarding the SDK's function tools: the guard runs where the tool's body runs.

A ``FunctionTool`` made by ``@function_tool`` invokes its body through the SDK's failure
handler, which turns an exception into the message the model reads (``failure_error_function``,
by default one that hides the error). The guard goes *inside* that handler, around the body:
it sees the exception itself (``state_consistency``) and the SDK still answers the model the
way the user configured, cancellation and timeouts included. A rejected call never reaches the
body: its answer is the guard's message, returned as the tool's output (for a tool with an
output schema, turned into a tool output guardrail's rejection, which the SDK does not
validate against that schema).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

import toolguard as tg

from ._declare import Contract, declare
from ._history import RAW
from ._sdk import (
    FunctionTool,
    ModelBehaviorError,
    Tool,
    ToolContext,
    ToolGuardrailFunctionOutput,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)
from ._waiting import claim

Body = Callable[[ToolContext[Any], str], Awaitable[Any]]

# True while a guarded tool's body runs. An agent used as a tool runs a whole nested agent
# loop inside one call: the outer agent emitted only that call, so the nested turns reserve
# no steps (the guard itself already keeps the nested calls out of the trajectory).
inside_tool: ContextVar[bool] = ContextVar("toolguard_openai_agents_inside_tool", default=False)

_GUARD_ATTR = "_toolguard_guard"


def guarded_by(tool: Tool) -> tg.Guard | None:
    """The guard that checks ``tool``'s calls, or None when it is not guarded."""
    guard = getattr(tool, _GUARD_ATTR, None)
    return guard if isinstance(guard, tg.Guard) else None


def guard_tools(
    tools: Iterable[Tool],
    guard: tg.Guard,
    *,
    contracts: Mapping[str, Contract] | None = None,
) -> list[Tool]:
    """The same tools with every ``FunctionTool`` guarded (a copy; the originals are not
    changed); other kinds of tool (hosted, shell, computer) pass through unchanged.

    ``contracts``: tool name -> a ``tg.ToolSpec`` or the options of ``guard.declare`` (refs,
    produces, invalidates, preconditions, grounded, mode, ...). A tool without a contract uses
    what the guard already knows under its name (``guard.declare`` / ``guard.tool``), or is
    declared with its JSON schema alone.
    """
    tools = list(tools)
    contracts = dict(contracts or {})
    _check_contract_names(contracts, {t.name for t in tools if isinstance(t, FunctionTool)})
    return guard_tool_list(tools, guard, contracts)


def guard_tool_list(
    tools: list[Tool], guard: tg.Guard, contracts: Mapping[str, Contract]
) -> list[Tool]:
    return [
        guard_tool(t, guard, contracts.get(t.name)) if isinstance(t, FunctionTool) else t
        for t in tools
    ]


def guard_tool(
    tool: FunctionTool, guard: tg.Guard, contract: Contract | None = None
) -> FunctionTool:
    """A copy of ``tool`` whose calls ``guard`` checks (the tool itself if already guarded)."""
    current = guarded_by(tool)
    if current is guard:
        if contract is not None:
            declare(guard, tool, contract)
        return tool
    if current is not None:
        raise ValueError(f"tool {tool.name!r} is already guarded by another Guard")
    declare(guard, tool, contract)
    # The SDK's own copy re-binds the failure handler to the copy, so the original tool (which
    # other agents may share) is left exactly as it was.
    guarded = copy.copy(tool)
    # The SDK validates a tool's result against its declared output schema, which the guard's
    # message never matches (the run failed with a UserError). A tool output guardrail's
    # rejection is the SDK's supported way to answer the model instead of the result, and it
    # skips that validation: first in the list, it turns the guard's answer into one.
    answer: Callable[[str], str] = str
    if guarded.output_json_schema is not None:
        answer = _Rejected
        guarded.tool_output_guardrails = [_ANSWER_REJECTION, *(tool.tool_output_guardrails or [])]
    invoker: Any = guarded.on_invoke_tool
    body = getattr(invoker, "_invoke_tool_impl", None)
    if callable(body):
        # openai-agents' internal seam between failure handler and body (0.24). Pinned by
        # tests/test_oa_tools.py::test_guard_sits_between_failure_handler_and_body.
        invoker._invoke_tool_impl = _guarded_body(guard, tool.name, body, answer, keep_markers=True)
    else:
        # A hand-made FunctionTool: its invoker is the body, and what it raises propagates.
        guarded.on_invoke_tool = _guarded_body(
            guard, tool.name, invoker, answer, keep_markers=False
        )
    setattr(guarded, _GUARD_ATTR, guard)
    return guarded


class _Rejected(str):
    """The guard's message as a blocked call's result, marked for ``_ANSWER_REJECTION``; a
    str, so a path of the SDK that runs no output guardrails still hands the model the
    message, as for any tool result."""


def _answer_rejection(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    if isinstance(data.output, _Rejected):
        return ToolGuardrailFunctionOutput.reject_content(str(data.output))
    return ToolGuardrailFunctionOutput.allow()


_ANSWER_REJECTION: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
    guardrail_function=_answer_rejection, name="toolguard"
)


def _guarded_body(
    guard: tg.Guard, name: str, body: Body, answer: Callable[[str], str], *, keep_markers: bool
) -> Body:
    # Annotated with ToolContext on purpose: the SDK reads the invoker's first annotation to
    # decide whether it receives the full ToolContext (with tool_call_id) or a narrower one.
    async def guarded(ctx: ToolContext[Any], input: str) -> Any:
        call_id = getattr(ctx, "tool_call_id", None)
        claim(call_id)  # this call ends here, whatever happens next
        pending = guard.check(name, input, call_id=call_id)
        if pending.rejection is not None:
            # The model reads a tool's return value: the guard's message is the answer. It is
            # no exception, so no failure handler, retry or run error is involved.
            return answer(str(pending.rejection))
        token = inside_tool.set(True)
        try:
            with pending:  # span current while the body runs; an exception is fail()
                try:
                    result = await body(ctx, input)
                except ModelBehaviorError as exc:
                    if keep_markers and _refused_arguments(exc, name):
                        pending.reject(_sdk_validation_failure(name))
                    raise  # the SDK's failure handler answers the model, as without the guard
                pending.finish(result)
                RAW.keep(call_id, name, result)  # for the next runs of a conversation
        finally:
            inside_tool.reset(token)
        return result

    if keep_markers:
        # The SDK hangs metadata on the body (the decorated callable behind
        # FunctionTool.__wrapped__, argument preparation for approvals): keep it visible.
        guarded.__dict__.update(getattr(body, "__dict__", {}))
    return guarded


def _refused_arguments(exc: ModelBehaviorError, name: str) -> bool:
    """The SDK's own argument validation refused the call before the tool's function ran
    (a pydantic validator the JSON schema the guard checks cannot express): its message
    starts so, with or without the validation details (``DONT_LOG_TOOL_DATA``)."""
    return str(exc).startswith(f"Invalid JSON input for tool {name}")


def _sdk_validation_failure(name: str) -> tg.Failure:
    # No argument value in any text: the SDK's own message (with them) goes to the model.
    text = f"the SDK's argument validation rejected the call to {name!r}; the tool did not run"
    return tg.Failure("schema", "schema.args", text, text, telemetry_message=text)


def _check_contract_names(contracts: Mapping[str, Any], names: set[str]) -> None:
    missing = sorted(set(contracts) - names)
    if missing:
        raise ValueError(
            f"contracts name tools that are not function tools here: {', '.join(missing)} "
            f"(function tools: {', '.join(sorted(names)) or 'none'})"
        )
