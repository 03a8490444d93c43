"""Raw tool calling without an agent framework: run a model turn's tool calls through a guard.

One helper per wire format, each with an ``async`` twin, each returning the items to append
to the conversation (an empty list when the model called no tool, so the loop can stop):

- OpenAI Chat Completions: ``run_openai_tool_calls`` -> ``{"role": "tool", ...}`` messages;
- OpenAI Responses: ``run_openai_response_calls`` -> ``function_call_output`` items;
- Anthropic Messages: ``run_anthropic_tool_uses`` -> one user message of ``tool_result``
  blocks.

The SDKs are never imported (the package imports no agent framework or client): the
responses are read by duck typing, so the SDK's objects and their JSON (plain dicts) both
work. The tools are the guard's (``@guard.tool``, ``guard.register``), run by name.

Wrap the loop in ``with guard.trajectory(...)`` (or pass ``trajectory=``): that is the
episode, and the dependency and information checks need it. A turn's calls take the next
steps in the order the model emitted them, reserved by call id before any runs, so the async
twins may finish them in any order. A rejected call (and a tool that raised) comes back as
the guard's message for the model to read; nothing is raised into the loop for it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import UsageError
from .guard import Guard
from .trajectories.nesting import counted_in
from .trajectories.trajectory import Trajectory
from .verdict import Rejection

Serializer = Callable[[Any], str]


@dataclasses.dataclass(frozen=True, slots=True)
class _Call:
    id: str | None
    name: str
    arguments: Any  # JSON text (OpenAI) or a mapping (Anthropic)
    echo: dict[str, Any]  # fields the reply must repeat to pair with the call


# -- OpenAI Chat Completions ----------------------------------------------------------------
def run_openai_tool_calls(
    guard: Guard,
    completion: Any,
    *,
    trajectory: Trajectory | None = None,
    serialize: Serializer | None = None,
) -> list[dict[str, Any]]:
    """Run the tool calls of a chat completion (``ChatCompletion``, its
    ``choices[0].message``, or the JSON of either) and return the ``{"role": "tool",
    "tool_call_id": ..., "content": ...}`` messages to append, in the model's order.

    ``content`` is a ``str`` result as it is, any other result as JSON (``serialize``
    replaces that), and ``str(rejection)`` for a rejected call or a tool that raised.
    Function calls only: calls of custom tools are left to the caller.
    """
    calls = _chat_calls(completion)
    results = _run(guard, calls, trajectory)
    return [_chat_reply(c, r, serialize) for c, r in zip(calls, results, strict=True)]


async def arun_openai_tool_calls(
    guard: Guard,
    completion: Any,
    *,
    trajectory: Trajectory | None = None,
    serialize: Serializer | None = None,
) -> list[dict[str, Any]]:
    """:func:`run_openai_tool_calls` running the turn's calls concurrently (async tools
    overlap; sync tools run inline); steps and replies stay in the model's order."""
    calls = _chat_calls(completion)
    results = await _arun(guard, calls, trajectory)
    return [_chat_reply(c, r, serialize) for c, r in zip(calls, results, strict=True)]


def _chat_calls(completion: Any) -> list[_Call]:
    message = completion
    choices = _field(completion, "choices")
    if choices is not None:
        # The first choice: with n > 1 the caller picks one and passes its message.
        message = _field(choices[0], "message") if choices else None
    elif not _has(completion, "tool_calls") and not (
        # The JSON of a final answer may omit tool_calls; Anthropic's and the Responses
        # API's messages carry a "type", chat messages do not.
        isinstance(completion, Mapping)
        and completion.get("role") == "assistant"
        and "type" not in completion
    ):
        raise _shape_error("run_openai_tool_calls", "a chat completion or its message", completion)
    calls = []
    for call in _field(message, "tool_calls") or ():
        function = _field(call, "function")
        if function is not None:
            name, arguments = _field(function, "name"), _field(function, "arguments")
            calls.append(_Call(_field(call, "id"), name, arguments, {}))
    return calls


def _chat_reply(call: _Call, result: Any, serialize: Serializer | None) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": _text(result, serialize)}


# -- OpenAI Responses -----------------------------------------------------------------------
def run_openai_response_calls(
    guard: Guard,
    response: Any,
    *,
    trajectory: Trajectory | None = None,
    serialize: Serializer | None = None,
) -> list[dict[str, Any]]:
    """Run the ``function_call`` items of a Responses API ``Response`` (or of its
    ``output`` list, or their JSON) and return the ``{"type": "function_call_output",
    "call_id": ..., "output": ...}`` items to append to the next request's ``input``."""
    calls = _response_calls(response)
    results = _run(guard, calls, trajectory)
    return [_response_reply(c, r, serialize) for c, r in zip(calls, results, strict=True)]


async def arun_openai_response_calls(
    guard: Guard,
    response: Any,
    *,
    trajectory: Trajectory | None = None,
    serialize: Serializer | None = None,
) -> list[dict[str, Any]]:
    """:func:`run_openai_response_calls` running the turn's calls concurrently."""
    calls = _response_calls(response)
    results = await _arun(guard, calls, trajectory)
    return [_response_reply(c, r, serialize) for c, r in zip(calls, results, strict=True)]


def _response_calls(response: Any) -> list[_Call]:
    items = _items(response, "output", "run_openai_response_calls", "a Response or its output")
    return [
        _Call(
            _field(item, "call_id"),
            _field(item, "name"),
            _field(item, "arguments"),
            _present(item, "namespace"),
        )
        for item in items
        if _field(item, "type") == "function_call"
    ]


def _response_reply(call: _Call, result: Any, serialize: Serializer | None) -> dict[str, Any]:
    return {
        "type": "function_call_output",
        "call_id": call.id,
        "output": _text(result, serialize),
        **call.echo,
    }


# -- Anthropic Messages ---------------------------------------------------------------------
def run_anthropic_tool_uses(
    guard: Guard,
    message: Any,
    *,
    trajectory: Trajectory | None = None,
    serialize: Serializer | None = None,
) -> list[dict[str, Any]]:
    """Run the ``tool_use`` blocks of an Anthropic ``Message`` (or of its ``content``, or
    their JSON) and return the messages to append: ``[]`` when there is none, else one
    ``{"role": "user", "content": [{"type": "tool_result", ...}, ...]}`` whose results
    carry ``is_error: True`` for a rejected call, a tool that raised, or an error result."""
    calls = _anthropic_calls(message)
    return _anthropic_reply(guard, calls, _run(guard, calls, trajectory), serialize)


async def arun_anthropic_tool_uses(
    guard: Guard,
    message: Any,
    *,
    trajectory: Trajectory | None = None,
    serialize: Serializer | None = None,
) -> list[dict[str, Any]]:
    """:func:`run_anthropic_tool_uses` running the turn's calls concurrently."""
    calls = _anthropic_calls(message)
    return _anthropic_reply(guard, calls, await _arun(guard, calls, trajectory), serialize)


def _anthropic_calls(message: Any) -> list[_Call]:
    blocks = _items(message, "content", "run_anthropic_tool_uses", "a Message or its content")
    return [
        _Call(
            _field(block, "id"),
            _field(block, "name"),
            _field(block, "input"),
            _present(block, "toolset_name"),
        )
        for block in blocks
        if _field(block, "type") == "tool_use"
    ]


def _anthropic_reply(
    guard: Guard, calls: list[_Call], results: list[Any], serialize: Serializer | None
) -> list[dict[str, Any]]:
    if not calls:
        return []
    blocks = []
    for call, result in zip(calls, results, strict=True):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": call.id,
            "content": _text(result, serialize),
        }
        if isinstance(result, Rejection) or _error_result(guard, call.name, result):
            block["is_error"] = True
        blocks.append({**block, **call.echo})
    return [{"role": "user", "content": blocks}]


def _error_result(guard: Guard, name: str, result: Any) -> bool:
    """The tool answered with an error result (``{"error": ...}``, or what its or the guard's
    ``error_result`` says is one): the guard recorded the environment's rejection, and the
    model is told so as for a tool that raised. The same predicate the guard asked."""
    try:
        detect = guard.get_tool(name).spec.error_result
    except KeyError:
        return False
    if detect is None:  # the tool's view of INHERIT: the guard's
        detect = guard.error_result
    if not detect:
        return False
    try:
        return bool(detect(result))
    except Exception:  # the guard recorded the predicate's failure; the result goes as is
        return False


# -- running a turn -------------------------------------------------------------------------
def _run(guard: Guard, calls: list[_Call], trajectory: Trajectory | None) -> list[Any]:
    traj = _prepare(guard, calls, trajectory, sync=True)
    answers: list[Any] = []
    try:
        for c in calls:
            answers.append(guard.call(c.name, c.arguments, call_id=c.id, trajectory=traj))
    except BaseException:
        # Ctrl-C in one call: the turn's later calls, whose steps are reserved, end as
        # cancelled (checked first: a call the guard would block is recorded so).
        for c in calls[len(answers) + 1 :]:
            guard.cancel_unstarted(c.name, c.arguments, call_id=c.id, trajectory=traj)
        raise
    return answers


async def _arun(guard: Guard, calls: list[_Call], trajectory: Trajectory | None) -> list[Any]:
    traj = _prepare(guard, calls, trajectory, sync=False)
    # A tool's exception comes back as a Rejection value; only a cancellation (or a misuse)
    # propagates. acall_batch checks every call before any runs, so a turn cancelled before
    # its calls started ends them as cancelled: each reserved step has its verdict and span.
    return await guard.acall_batch([(c.name, c.arguments, c.id) for c in calls], trajectory=traj)


def _prepare(
    guard: Guard, calls: list[_Call], trajectory: Trajectory | None, *, sync: bool
) -> Trajectory | None:
    """Refuse a turn the guard cannot run before any of it runs, then reserve its steps."""
    for call in calls:
        try:
            tool = guard.get_tool(call.name)
        except (KeyError, TypeError):
            continue  # an unknown tool: the guard rejects the call, and it counts in T
        if not tool.has_function:
            raise UsageError(
                f"tool {call.name!r} is declared by contract alone, so the guard cannot run "
                "it: register its function (guard.register / @guard.tool)"
            )
        if sync and tool.is_async:
            raise UsageError(
                f"tool {call.name!r} is async: run the turn with the async helper (arun_...)"
            )
    traj = counted_in(trajectory)
    if traj is None:  # no trajectory, or a turn run inside a guarded call: no steps to keep
        return trajectory
    traj.reserve([c.id for c in calls if isinstance(c.id, str)])
    return traj


def _text(result: Any, serialize: Serializer | None) -> str:
    if isinstance(result, Rejection):
        return str(result)
    if serialize is not None:
        return serialize(result)
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, default=_jsonable, ensure_ascii=False)
    except Exception:  # keys json cannot write, a cycle, nested past the interpreter's depth
        return _plain_text(result)


def _plain_text(value: Any) -> str:
    """``str(value)``, or what it is when even that fails: the turn's replies go back."""
    try:
        return str(value)
    except Exception:  # a __str__ that raises, or nested past the interpreter's depth
        return f"<a {type(value).__name__} result that cannot be written as text>"


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):  # pydantic models
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return _plain_text(value)


# -- reading SDK objects and their JSON alike -----------------------------------------------
def _field(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _has(obj: Any, key: str) -> bool:
    return key in obj if isinstance(obj, Mapping) else hasattr(obj, key)


def _present(obj: Any, key: str) -> dict[str, Any]:
    value = _field(obj, key)
    return {key: value} if value is not None else {}


def _items(obj: Any, key: str, helper: str, expected: str) -> Sequence[Any]:
    if _has(obj, key):
        items = _field(obj, key)
        return items if isinstance(items, Sequence) and not isinstance(items, str) else ()
    if isinstance(obj, Sequence) and not isinstance(obj, str | bytes):
        return obj
    raise _shape_error(helper, expected, obj)


def _shape_error(helper: str, expected: str, obj: Any) -> UsageError:
    return UsageError(f"{helper}() takes {expected} (an SDK object or its JSON), not {obj!r:.80}")
