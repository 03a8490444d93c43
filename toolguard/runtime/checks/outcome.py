"""The judge stage, after the call ran: did the environment reject it (it raised, or its
result says so: ``error_result``), and do the postconditions hold (``state_consistency``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import _contract as contract
from ..tools.conditions import shorten
from ..tools.error_result import SIZED, default_error_result
from ..tools.tool import Tool
from ..verdict import NAME_LIMIT, Failure, shorten_text
from .conditions import condition_stage
from .guard_error import guard_error

if TYPE_CHECKING:
    from ..calls.call import _Call

# (call, result, error: what the caller said, None to read it from the result)
# -> (the environment rejected the call, the failures found)
Judge = Callable[["_Call", Any, "bool | None"], "tuple[bool, list[Failure]]"]


def plain_judge(tool: Tool) -> bool:
    """Whether the judge has nothing to find in a plain dict without an ``"error"`` key
    when the tool and guard read errors the default way (most results): the pipeline then
    skips calling it."""
    own = tool.spec.error_result
    return not tool.postconditions and (own is None or own is default_error_result)


def judge_stage(tool: Tool) -> Judge:
    """The tool's judge: its ``error_result`` (or the guard's, read per call) and its
    postconditions, decided once."""
    name = tool.name
    own = tool.spec.error_result  # None: the guard's; False: no result is an error
    post = condition_stage(tool.postconditions, "postcondition", contract.STATE_CONSISTENCY)

    def judge(call: _Call, result: Any, error: bool | None) -> tuple[bool, list[Failure]]:
        failures: list[Failure] = []
        if error is None:
            guard = call._guard
            detect = own if own is not None else guard.error_result
            if detect:
                try:
                    if detect is default_error_result and type(result) is dict:
                        # The default on a plain dict (most results), without the call.
                        value = result.get("error")
                        error = (
                            value is not None
                            and value is not False
                            and (len(value) > 0 if isinstance(value, SIZED) else True)
                        )
                    else:
                        error = bool(detect(result))
                except Exception as exc:
                    failure = guard_error(
                        "state.error_result",
                        contract.STATE_CONSISTENCY,
                        "the error_result predicate",
                        exc,
                        guard.fail_open,
                        guard.record_content,
                    )
                    if failure is not None:
                        failures.append(failure)
        if error:
            failures.append(error_result_failure(name, result))
        if post is not None:
            found = post(call, call.arguments, False, False, result)
            if found:
                failures.extend(found)
        return bool(error), failures

    return judge


def exception_failure(tool: str, exc: BaseException) -> Failure:
    """The environment rejected the call by raising."""
    tool, kind, text = shorten_text(tool, NAME_LIMIT), type(exc).__name__, _text(exc)
    return Failure(
        contract.STATE_CONSISTENCY,
        "state.exception",
        f"{tool} raised {kind}: {shorten_text(text, 800)}",
        f"`{tool}` failed: {kind}: {shorten_text(text, 300)}",
        telemetry_message=f"{tool} raised {kind}",
    )


def error_result_failure(tool: str, result: Any) -> Failure:
    """The environment rejected the call in its answer (an error flag or marker)."""
    shown = shorten(result)
    return Failure(
        contract.STATE_CONSISTENCY,
        "state.error_result",
        f"the environment rejected the call: {shown}",
        f"`{shorten_text(tool, NAME_LIMIT)}` was rejected by the environment: "
        f"{shorten_text(_text(result), 300)}",
        telemetry_message="the environment rejected the call (an error result)",
    )


def _text(value: Any) -> str:
    """str() of a value whose __str__ may raise or run on (a hostile exception or result)."""
    try:
        return str(value)[:2000]
    except Exception:
        return f"<{type(value).__name__}>"
