"""One tool call through the guard: declare its tool, check it, run it, deliver a rejection."""

from __future__ import annotations

import dataclasses
import threading
import warnings
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any, Literal

import pydantic
import toolguard as tg
from opentelemetry import trace
from opentelemetry.trace import NoOpTracer, Span
from pydantic import ValidationError
from pydantic_ai import RunContext
from pydantic_ai.exceptions import (
    AgentRunError,
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    RunCancelled,
    SkipToolExecution,
    ToolFailed,
    ToolFailedError,
    ToolRetryError,
    UserError,
)
from pydantic_ai.messages import ToolReturn
from pydantic_ai.tools import ToolDefinition

Delivery = Literal["failed", "return", "retry"]
ToolErrors = Literal["deliver", "raise"]

# What the framework raises through a tool's handler to steer the run: the call's outcome is
# recorded, and the exception goes on to Pydantic AI unchanged.
_FRAMEWORK_SIGNALS = (
    ToolRetryError,
    ToolFailedError,
    ModelRetry,
    ToolFailed,
    AgentRunError,
    UserError,
)
# The call did not finish: it will be resumed (a deferral) or the run is going away.
_NOT_FINISHED = (CallDeferred, ApprovalRequired, RunCancelled)
_TOOL_CALL_ID = "gen_ai.tool.call.id"
# The trajectory of the guarded tool running in this context: an agent run started by that
# tool (a delegate) is nested in its call, and its turns reserve no steps there.
RUNNING: ContextVar[tg.Trajectory | None] = ContextVar(
    "toolguard_pydantic_ai_running", default=None
)
_ANY_ARGUMENTS = pydantic.ConfigDict(
    extra="ignore", arbitrary_types_allowed=True, protected_namespaces=()
)


def declare(
    guard: tg.Guard,
    name: str,
    tool_def: ToolDefinition,
    contracts: Mapping[str, tg.ToolOptions],
) -> None:
    """Make the tool known to the guard: the user's own declaration of that name if there is
    one, else its contract from ``contracts`` over the argument names the model is shown."""
    shown = shown_names(tool_def.parameters_json_schema)
    if guard.has_tool(name):
        _warn_if_other_arguments(guard, name, shown)
        return
    contract: dict[str, Any] = dict(contracts.get(name, {}))
    if "json_schema" not in contract and "args_model" not in contract:
        # Pydantic AI has already validated the arguments with the tool's own pydantic schema
        # (and reports failures itself, recorded by on_tool_validate_error): the guard gets the
        # argument names only, never second-guessing pydantic's lax coercions ("5" -> 5).
        contract.update(_names_only(name, tool_def.parameters_json_schema))
    contract.setdefault("description", tool_def.description)
    try:
        tool = guard.declare(name, **contract)
    except tg.ToolDefinitionError:
        # Another agent sharing this guard declared it in the meantime; otherwise the
        # contract itself is wrong, and the error says how.
        if not guard.has_tool(name):
            raise
        _warn_if_other_arguments(guard, name, shown)
        return
    _SHOWN[tool] = shown


# The argument names the model was shown, of each tool this adapter declared (None: a schema
# without properties). Held by the guard's own Tool object: a tool the user declares again
# under that name is theirs, and agents sharing a guard share what it knows.
_SHOWN: weakref.WeakKeyDictionary[tg.Tool, frozenset[str] | None] = weakref.WeakKeyDictionary()


def shown_names(schema: Mapping[str, Any]) -> frozenset[str] | None:
    props = schema.get("properties")
    return frozenset(props) if isinstance(props, Mapping) else None


def _warn_if_other_arguments(guard: tg.Guard, name: str, shown: frozenset[str] | None) -> None:
    # One guard holds one tool per name: a second agent's tool of that name with other
    # parameters would have its calls judged by the first one's (schema failures).
    held = _SHOWN.get(guard.get_tool(name), shown)
    if held != shown:
        warnings.warn(
            f"toolguard: the guard already holds a tool {name!r} with arguments "
            f"({_listed(held)}), declared from another agent's tool; this agent's {name!r} "
            f"takes ({_listed(shown)}), so its calls are judged against the first. Give each "
            "agent its own Guard, or its tool another name.",
            UserWarning,
            stacklevel=2,
        )


def _listed(names: frozenset[str] | None) -> str:
    return "unknown" if names is None else ", ".join(sorted(names)) or "none"


def guarded_arguments(guard: tg.Guard, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the model sent them, for the guard to judge.

    For a tool whose only parameter is model-like (a pydantic model, a dataclass, a
    TypedDict), Pydantic AI shows the model that type's fields and hands the hooks
    ``{parameter: instance}``: the guard gets the instance's fields (validated values), the
    names the model was shown and the tool was declared with. A tool the user declared
    themselves keeps the arguments as Pydantic AI validated them."""
    if len(args) != 1:
        return args
    shown = _SHOWN.get(guard.get_tool(name)) if guard.has_tool(name) else None
    if shown is None or shown == args.keys():
        return args
    (value,) = args.values()
    fields = _fields(value, shown)
    return args if fields is None else fields


def _fields(value: Any, shown: frozenset[str]) -> dict[str, Any] | None:
    if isinstance(value, Mapping):  # a TypedDict
        return dict(value)
    if isinstance(value, pydantic.BaseModel):
        infos: Mapping[str, Any] = type(value).model_fields
        extra = value.model_extra or {}
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        pydantic_infos = getattr(type(value), "__pydantic_fields__", {})  # a pydantic dataclass
        infos = {f.name: pydantic_infos.get(f.name) for f in dataclasses.fields(value)}
        extra = {}
    else:
        return None
    out = {_shown_name(key, info, shown): getattr(value, key) for key, info in infos.items()}
    out.update(extra)
    return out


def _shown_name(key: str, info: Any, shown: frozenset[str]) -> str:
    # The schema names a field by its alias when it has one: the name the model sends.
    for alias in (getattr(info, "validation_alias", None), getattr(info, "alias", None)):
        if isinstance(alias, str) and alias in shown:
            return alias
    return key


def _names_only(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """A schema that accepts any value of each argument: a pydantic model of ``Any`` fields
    (a few microseconds a call, where a JSON Schema validator takes tens)."""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return {"json_schema": {"type": "object"}}  # argument names unknown: nothing checked
    fields: dict[str, Any] = {
        key: (Any, spec.get("default") if isinstance(spec, Mapping) else None)
        for key, spec in props.items()
    }
    try:
        model = pydantic.create_model(f"{name}_arguments", __config__=_ANY_ARGUMENTS, **fields)
    except Exception:  # a name pydantic cannot take as a field ("_private"): JSON Schema
        return {"json_schema": {"type": "object", "properties": {key: {} for key in props}}}
    return {"args_model": model}


def framework_span(guard: tg.Guard, ctx: RunContext[Any], call_id: str) -> Span | None:
    """Pydantic AI's own span of this call (its instrumentation's ``execute_tool``), when it
    is the current span: the guard's attributes go on it instead of on a second span.
    Matched by call id, so any instrumentation version's span name works."""
    if isinstance(ctx.tracer, NoOpTracer) or not guard.reuse_framework_spans:
        return None  # Pydantic AI's instrumentation is off: it opened no span
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    attributes = getattr(span, "attributes", None)
    if attributes is not None and attributes.get(_TOOL_CALL_ID) == call_id:
        return span
    return None


def deliver(rejection: tg.Rejection, how: Delivery) -> str:
    """The rejection as Pydantic AI's answer to the call. ``failed``: a failed tool return
    (``ToolFailed``: the provider's error channel, no retry budget used); ``return``: a plain
    tool result; ``retry``: ``ModelRetry``, which counts against the tool's ``retries``."""
    text = str(rejection)
    if how == "failed":
        raise ToolFailed(text)
    if how == "retry":
        raise ModelRetry(text)
    return text


async def run_checked(
    pending: tg.PendingCall,
    run: Callable[[], Awaitable[Any]],
    how: Delivery,
    tool_errors: ToolErrors,
    traj: tg.Trajectory | None,
) -> Any:
    """Run an admitted call (of ``traj``) and close ``pending`` with what happened."""
    # `with`: the guard's own span (tracing without Pydantic AI's instrumentation) is current
    # while the tool runs, and a BaseException (task cancelled) closes the call as cancelled.
    with pending:
        token = RUNNING.set(traj)
        try:
            result = await run()
        except SkipToolExecution as skip:  # an inner hook answered for the tool
            pending.finish(_value(skip.result))
            raise
        except _NOT_FINISHED as exc:
            pending.cancel()
            if traj is not None and isinstance(exc, ApprovalRequired) and pending.call_id:
                with _asked_lock:
                    _ASKED.setdefault(traj, set()).add(pending.call_id)
            raise
        except _FRAMEWORK_SIGNALS as exc:
            pending.fail(exc)
            raise
        except Exception as exc:
            rejection = pending.fail(exc)
            if tool_errors == "raise":
                raise
            return deliver(rejection, how)
        finally:
            RUNNING.reset(token)
        pending.finish(_value(result))
        return result


# The calls of each trajectory whose tool asked for approval by raising ApprovalRequired:
# each took its step (cancelled) there, so the run resuming it in the same trajectory with a
# denial adds none (an approval is checked again as it runs, and takes one).
_ASKED: weakref.WeakKeyDictionary[tg.Trajectory, set[str]] = weakref.WeakKeyDictionary()
_asked_lock = threading.Lock()


def take_asked(traj: tg.Trajectory, call_ids: Iterable[str]) -> set[str]:
    """Which of ``call_ids`` asked ``traj`` for approval by raising; forgotten now."""
    with _asked_lock:
        asked = _ASKED.get(traj, set())
        taken = asked.intersection(call_ids)
        asked.difference_update(taken)
    return taken


def _value(result: Any) -> Any:
    # A ToolReturn carries the tool's value beside extra content for the model: the contract
    # (produces, postconditions, error results) reads the value.
    return result.return_value if isinstance(result, ToolReturn) else result


def validation_message(tool: str, error: BaseException) -> str:
    """Why Pydantic AI refused the arguments, for the span: argument names and error types,
    never the values (the model still gets Pydantic AI's own retry text)."""
    if isinstance(error, ValidationError):
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['type']}"
            for e in error.errors(include_url=False, include_input=False, include_context=False)
        ]
        shown = "; ".join(problems[:4]) + ("; ..." if len(problems) > 4 else "")
        return f"Pydantic AI rejected the arguments of {tool!r}: {shown}"
    return f"the argument validator of {tool!r} asked the model to retry (ModelRetry)"
