"""Chat messages -> events: the OpenAI chat format, which tau2's simulations share.

A turn is one assistant message's ``tool_calls``; the ``tool`` messages that follow it
answer them. Each answer is matched to its call *within that turn*: by id among the calls not
yet answered (the first such by position, so a turn that reuses an id is answered in order),
by position when the answer carries no id. An id the turn did not emit, or a second answer to
a call, is an error: real logs reuse call ids across turns, and joining by id over the whole
run would silently hand a failed call's answer to another call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .model import Answer, Event, RecordedCall, ReplayInputError, Said, Turn

# Text results that say the environment refused the call: tau-bench's tools and its
# environment's exception handler ("Error: ..."), BFCL's executor ("Error during execution").
ERROR_PREFIXES = ("Error:", "Error during execution")
# Roles whose text the agent was given.
_TOLD = ("user", "system", "developer")


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return json.dumps(content) if isinstance(content, Mapping) else str(content)


def result_of(content: Any) -> Any:
    """What a tool message says, as the contract reads it: JSON text that is an object or an
    array is decoded (so ``produces`` finds its keys), anything else stays text."""
    text = text_of(content)
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError):  # nested past the parser's stack: text too
            pass
    return text


def error_of(message: Mapping[str, Any], result: Any) -> bool:
    """The environment's verdict on a call, from its recorded answer: the message's own
    ``error`` (tau2) or ``is_error`` field when it has one (a boolean, or a non-empty error
    text); else a result object with a non-empty ``"error"``; else a text starting with one
    of :data:`ERROR_PREFIXES`."""
    for flag in ("error", "is_error"):
        value = message.get(flag)
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value:  # an error message in place of the flag
            return True
    if isinstance(result, Mapping):
        value = result.get("error")
        return value is not None and value is not False and value != "" and value != {}
    if isinstance(result, str):
        return result.lstrip().startswith(ERROR_PREFIXES)
    return False


def outcome_of(record: Mapping[str, Any]) -> bool | None:
    """Y from a run's own fields: ``success`` or ``outcome`` (a boolean, or one of
    success/pass/passed/fail/failed/failure), else ``reward`` (a number: success when it is
    1 within 1e-6, as tau-bench and tau2 count a pass)."""
    for key in ("success", "outcome"):
        value = record.get(key)
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            word = value.strip().lower()
            if word in ("success", "pass", "passed", "true"):
                return True
            if word in ("fail", "failed", "failure", "false"):
                return False
    return reward_success(record.get("reward"))


def reward_success(reward: Any) -> bool | None:
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return None
    return abs(float(reward) - 1.0) <= 1e-6


def tool_schemas(tools: Any) -> dict[str, Mapping[str, Any] | None] | None:
    """An OpenAI ``tools`` list (``{"type": "function", "function": {...}}`` or the flat
    ``{"name", "parameters"}``) as name -> parameter schema; None when absent."""
    if not isinstance(tools, list):
        return None
    out: dict[str, Mapping[str, Any] | None] = {}
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function", tool)
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, Mapping) else None
    return out


ErrorReader = Callable[[Mapping[str, Any], Any], bool]


def events_of(messages: Any, where: str, *, error: ErrorReader | None = None) -> list[Event]:
    """The events of one run's messages; raises ReplayInputError naming ``where`` and the
    message's index when the messages do not make a conversation. ``error(message, result)``
    reads a tool answer's verdict (default :func:`error_of`; a format of its own may differ:
    ToolSandbox's exception lines)."""
    if not isinstance(messages, list):
        raise ReplayInputError(f"{where}: the messages are not a list")
    events: list[Event] = []
    turn: list[RecordedCall] | None = None
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ReplayInputError(f"{where}: message {index} is not an object")
        if message.get("role") == "tool" and isinstance(message.get("tool_messages"), list):
            answers: Sequence[Any] = message["tool_messages"]  # tau2's MultiToolMessage
        else:
            answers = [message]
        for answer in answers:
            turn = _message(events, turn, answer, index, where, error or error_of)
    return events


def _message(
    events: list[Event],
    turn: list[RecordedCall] | None,
    message: Any,
    index: int,
    where: str,
    error: ErrorReader,
) -> list[RecordedCall] | None:
    if not isinstance(message, Mapping):
        raise ReplayInputError(f"{where}: message {index} is not an object")
    role = message.get("role")
    if role in _TOLD:
        text = text_of(message.get("content"))
        if text:
            events.append(Said(text))
        return None  # a user's own tool calls (tau2's telecom user) are not the agent's
    if role == "assistant":
        raw_calls = message.get("tool_calls") or ()
        if not isinstance(raw_calls, list | tuple):
            kind = type(raw_calls).__name__
            raise ReplayInputError(f"{where}: message {index}: tool_calls is a {kind}, not a list")
        calls = [_call(c, index, k, where) for k, c in enumerate(raw_calls)]
        legacy = message.get("function_call")
        if not calls and isinstance(legacy, Mapping):
            calls = [_call(legacy, index, 0, where)]
        if calls:
            events.append(Turn(calls))
        return calls or None
    if role in ("tool", "function"):
        if message.get("requestor") == "user":
            return turn  # tau2: the answer to a call the simulated user made
        if not turn:
            raise ReplayInputError(
                f"{where}: message {index} is a tool answer with no tool call before it"
            )
        _answer(turn, message, index, where, error)
        return turn
    raise ReplayInputError(f"{where}: message {index} has an unknown role {role!r}")


def _call(raw: Any, index: int, k: int, where: str) -> RecordedCall:
    if not isinstance(raw, Mapping):
        raise ReplayInputError(f"{where}: message {index}, tool call {k} is not an object")
    fn = raw.get("function")
    body = fn if isinstance(fn, Mapping) else raw
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ReplayInputError(f"{where}: message {index}, tool call {k} has no name")
    arguments = body.get("arguments")
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}  # providers write "" for a call without arguments
    call_id = raw.get("id")
    return RecordedCall(name, arguments, call_id if isinstance(call_id, str) else None)


def _answer(
    turn: list[RecordedCall],
    message: Mapping[str, Any],
    index: int,
    where: str,
    error: ErrorReader,
) -> None:
    answer_id = message.get("tool_call_id", message.get("id"))
    if not isinstance(answer_id, str) or not answer_id:
        answer_id = None
    open_calls = [c for c in turn if c.answer is None]
    if answer_id is None:
        target = open_calls[0] if open_calls else None
    else:
        target = next((c for c in open_calls if c.call_id == answer_id), None)
    if target is None:
        if answer_id is not None and all(c.call_id != answer_id for c in turn):
            why = f"answers call id {answer_id!r}, which the turn before it did not emit"
        else:
            why = "is a second answer to a call of the turn before it"
        raise ReplayInputError(f"{where}: message {index} {why}")
    result = result_of(message.get("content"))
    target.answer = Answer(result, error(message, result))
