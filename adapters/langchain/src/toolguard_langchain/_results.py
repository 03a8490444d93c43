"""What the framework answered for one call, in the terms of the guard's contract."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import toolguard as tg
from pydantic import ValidationError
from pydantic.v1 import ValidationError as ValidationErrorV1

from ._framework import Command, ToolMessage


def rejection_message(rejection: tg.Rejection, tool_call: Mapping[str, Any]) -> ToolMessage:
    """A blocked call answered the way the framework answers a failed one."""
    return ToolMessage(
        content=str(rejection),
        tool_call_id=tool_call.get("id") or "",
        name=tool_call.get("name"),
        status="error",
    )


def outcome(
    answer: Any, call_id: str | None, own: tuple[bool, Any] = (False, None)
) -> tuple[Any, bool | None]:
    """``(result, error)`` for ``pending.finish``: the value the contract reads and ``True``
    when the framework answered with ``status="error"`` (``None`` lets the guard's
    ``error_result`` decide). ``own``: the tool's own return value, as :func:`own_result`
    found it; the value is read as :func:`message_result` reads it."""
    message = _tool_message(answer, call_id)
    if message is None:
        if isinstance(answer, Command):
            return answer.update, None
        return answer, None
    if message.status == "error":  # the framework's failure text, not the tool's value
        return message_result(message, (False, None)), True
    return message_result(message, own), None


def own_result(raw: Sequence[Any] | None, tool: Any) -> tuple[bool, Any]:
    """``(found, value)``: which of the values the running copy of the tool kept
    (``_raw.py``, one per attempt) is the tool's result. The one place that decides it: the
    call's judgement reads it, and so does a later run of the conversation (the value is
    kept for ``_history.py``), so both bind the same ids.

    The last attempt's (a retry middleware may run the tool again), unless the tool's
    return value is not its result: a ``ToolMessage`` or ``Command`` the tool built is the
    framework's answer (its message is read, not the object's own attributes, such as the
    message's uuid ``id``), and a content-and-artifact tool returns a pair whose artifact
    the message holds."""
    if not raw or getattr(tool, "response_format", None) == "content_and_artifact":
        return False, None
    value = raw[-1]
    if isinstance(value, ToolMessage | Command):
        return False, None
    return True, value


def message_result(message: ToolMessage, own: tuple[bool, Any]) -> Any:
    """The value the contract reads from a call answered with ``message``: its artifact;
    else the tool's own return value (``own``, when found); else the message content, JSON
    text parsed back."""
    if message.artifact is not None:
        return message.artifact
    found, value = own
    return value if found else parsed(message.content)


def refused_arguments(name: str, refused: BaseException | None, ran: bool) -> tg.Failure | None:
    """The failure to close a call with when LangChain's own argument parsing refused it
    (``refused``, from the tool's ``_to_args_and_kwargs``) and no attempt ran the tool: not
    executed, so blocked whatever the guard's mode. The text names the arguments and the
    error types, never a value; the model gets LangChain's own message, as without the
    guard."""
    if refused is None or ran:
        return None
    problems = _problems(refused)
    shown = f" ({problems})" if problems else f" ({type(refused).__name__})"
    why = f"LangChain refused the arguments of {name!r}{shown}; the tool did not run"
    return tg.Failure("schema", "schema.args", why, why, telemetry_message=why)


def _problems(exc: BaseException) -> str:
    # Only the top-level location: it is an argument's name, deeper ones can be dict keys
    # the model sent (values).
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
    elif isinstance(exc, ValidationErrorV1):
        errors = exc.errors()  # type: ignore[assignment]
    else:
        return ""
    problems = list(
        dict.fromkeys(f"{e['loc'][0] if e['loc'] else 'arguments'}: {e['type']}" for e in errors)
    )
    return "; ".join(problems[:4]) + ("; ..." if len(problems) > 4 else "")


# What LangGraph's tool node answers for a name it has no tool of
# (``INVALID_TOOL_NAME_ERROR_TEMPLATE``; pinned by tests/test_modes.py).
_NO_SUCH_TOOL = "Error: {name} is not a valid tool"


def no_such_tool(name: str, answer: Any, call_id: str | None) -> tg.Failure | None:
    """The failure to close a call the guard checked (it knows the name) with when the
    tool node has no tool of that name and refused it itself: not executed, so blocked."""
    message = _tool_message(answer, call_id)
    if message is None or message.status != "error" or not isinstance(message.content, str):
        return None
    if not message.content.startswith(_NO_SUCH_TOOL.format(name=name)):
        return None
    why = "no tool of that name among the agent's tools (refused by the framework)"
    return tg.Failure("schema", "schema.tool", why, why, telemetry_message=why)


def message_content(answer: Any, call_id: str | None) -> Any:
    message = _tool_message(answer, call_id)
    return None if message is None else message.content


def is_error(answer: Any, call_id: str | None) -> bool:
    message = _tool_message(answer, call_id)
    return message is not None and message.status == "error"


def _tool_message(answer: Any, call_id: str | None) -> ToolMessage | None:
    if type(answer) is ToolMessage or isinstance(answer, ToolMessage):
        return answer
    if isinstance(answer, Command):
        update = answer.update
        messages = update.get("messages") if isinstance(update, Mapping) else None
        return _find(messages, call_id) if isinstance(messages, list) else None
    if isinstance(answer, list):  # a tool node may answer with several items
        for item in answer:
            found = _tool_message(item, call_id)
            if found is not None and (call_id is None or found.tool_call_id == call_id):
                return found
    return None


def _find(messages: list[Any], call_id: str | None) -> ToolMessage | None:
    for message in messages:
        if isinstance(message, ToolMessage) and (
            call_id is None or message.tool_call_id == call_id
        ):
            return message
    return None


def parsed(content: Any) -> Any:
    # LangChain turns a dict or list result into JSON text; `produces` and `error_result`
    # read the structure, so it is parsed back (text that is no JSON stays text).
    if isinstance(content, str) and content[:1] in ("{", "["):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content
