"""What the framework answered for one call, in the terms of the guard's contract."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import toolguard as tg

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
    answer: Any, call_id: str | None, raw: list[Any] | None = None, tool: Any = None
) -> tuple[Any, bool | None]:
    """``(result, error)`` for ``pending.finish``: the value the contract reads and ``True``
    when the framework answered with ``status="error"`` (``None`` lets the guard's
    ``error_result`` decide). The value: the artifact; else the tool's own return value
    (``raw``: what the running copy of the tool kept, ``_raw.py``); else the message content,
    JSON text parsed back."""
    message = _tool_message(answer, call_id)
    if message is None:
        if isinstance(answer, Command):
            return answer.update, None
        return answer, None
    error = True if message.status == "error" else None
    if message.artifact is not None:
        return message.artifact, error
    if raw and error is None and getattr(tool, "response_format", None) != "content_and_artifact":
        value = raw[-1]  # the last attempt's, when a retry middleware ran the tool again
        if not isinstance(value, ToolMessage | Command):
            return value, error
    return parsed(message.content), error


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
