"""What the generated code calls: the PendingCall of a rare outcome, rebuilt from the call's
state, and the namespace every generated module starts from.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, NoOpTracer, ProxyTracer

from .. import _contract as contract
from .._errors import ToolCallRejected
from . import telemetry as tel
from .call import PendingCall
from .checks import (
    _COLLECTIONS,
    _NO_BINDINGS,
    bind_failure,
    condition_error,
    condition_failure,
    default_error_result,
    error_result_failure,
    grounded_failure,
    guard_error,
    path_failure,
    ref_failure,
    ungrounded,
)
from .nesting import _inside_tool
from .schema import SchemaFailure, parse_arguments
from .tool import _KEY_CONTAINERS, _LEAVES, Tool, _find_key, find_key_into
from .trajectory import Trajectory, _Binding, _current, _open
from .verdict import Failure, Rejection

if TYPE_CHECKING:
    from .guard import Guard

logger = logging.getLogger("toolguard")


# -- what the generated code calls --------------------------------------------------------------


def _made(
    guard: Guard,
    tool: Tool,
    owner: Any,
    call_id: str | None,
    traj: Trajectory | None,
    step: int | None,
    span: Any,
    recording: bool,
    arguments: Any,
) -> PendingCall:
    """The PendingCall the general path would hold at this point of the call."""
    pending = PendingCall.__new__(PendingCall)
    pending.guard = guard
    pending.name = tool.name
    pending.tool = tool
    pending.instance = owner
    pending.call_id = call_id
    pending.rejection = None
    pending.decision = None
    pending.sorted_failures = []
    pending.traj = traj
    pending.step = step
    pending.mode = "block"
    pending.failures = []
    pending.arguments = arguments if isinstance(arguments, dict) else {}
    pending.blocked = False
    pending.token = None
    pending.nested = None
    pending.owns_span = True
    pending.span = span
    pending.recording = recording
    return pending


def binder(tool: Tool) -> dict[str, Callable[..., Any]]:
    """Helpers closing over the tool (bound into each generated module)."""

    def blocked(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
        failure: Failure,
    ) -> Rejection:
        pending = _made(guard, tool, owner, call_id, traj, step, span, recording, values)
        pending.reject(failure)
        assert pending.rejection is not None
        return pending.rejection

    def cancel(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
    ) -> None:
        _made(guard, tool, owner, call_id, traj, step, span, recording, values).cancel()

    def fail(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
        exc: BaseException,
    ) -> Rejection:
        pending = _made(guard, tool, owner, call_id, traj, step, span, recording, values)
        return pending.fail(exc)

    def close_ran(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
        failures: list[Failure],
    ) -> None:
        pending = _made(guard, tool, owner, call_id, traj, step, span, recording, values)
        pending.failures = failures
        pending._close(executed=True)

    def abandon(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
        failures: list[Failure] | None,
    ) -> None:
        pending = _made(guard, tool, owner, call_id, traj, step, span, recording, values)
        pending.failures = list(failures or ())
        if pending.decision is None:
            pending.__del__()  # the warning and the cancel of a dropped call

    return {
        "_abandon": abandon,
        "_blocked": blocked,
        "_cancel": cancel,
        "_fail": fail,
        "_close_ran": close_ran,
    }


def _leave(token: object | None, nested: Any) -> None:
    """PendingCall.leave: the span no longer current, the nested-call mark reset."""
    if token is not None:
        tel.detach(token)
    if nested is not None:
        try:
            _inside_tool.reset(nested)
        except ValueError:  # left in another context (a framework's callback thread)
            _inside_tool.set(False)


async def raise_async(rejection: Rejection) -> Any:
    raise ToolCallRejected(rejection)


async def _value(value: Any) -> Any:
    return value


def _runtime() -> dict[str, Any]:
    from pydantic import ValidationError

    return {
        "_current_get": _current.get,
        "_inside_get": _inside_tool.get,
        "_inside_set": _inside_tool.set,
        "_inside_reset": _inside_tool.reset,
        "_otel_attach": otel_context.attach,
        "_otel_detach": otel_context.detach,
        "_set_span_in_context": trace.set_span_in_context,
        "_open": _open,
        "_ProxyTracer": ProxyTracer,
        "_NoOpTracer": NoOpTracer,
        "_INVALID_SPAN": INVALID_SPAN,
        "_REUSED": tel.REUSED,
        "_start_call_span": tel.start_call_span,
        "_call_attributes": tel.call_attributes,
        "_VALID_ATTRIBUTES": {contract.VALID: True, contract.DECISION: contract.ALLOWED},
        "_ALLOWED": contract.ALLOWED,
        "_STATE": contract.STATE_CONSISTENCY,
        "_PendingCall": PendingCall,
        "_ToolCallRejected": ToolCallRejected,
        "_SchemaFailure": SchemaFailure,
        "_ValidationError": ValidationError,
        "_COLLECTIONS": _COLLECTIONS,
        "_NO_BINDINGS": _NO_BINDINGS,
        "_ref_failure": ref_failure,
        "_path_failure": path_failure,
        "_condition_error": condition_error,
        "_condition_failure": condition_failure,
        "_ungrounded": ungrounded,
        "_grounded_failure": grounded_failure,
        "_bind_failure": bind_failure,
        "_default_error_result": default_error_result,
        "_guard_error": guard_error,
        "_error_result_failure": error_result_failure,
        "_parse_arguments": parse_arguments,
        "_find_key_into": find_key_into,
        "_find_key": _find_key,
        "_LEAVES": _LEAVES,
        "_KEY_CONTAINERS": _KEY_CONTAINERS,
        "_Binding": _Binding,
        "_leave": _leave,
        "_made": _made,
        "_raise_async": raise_async,
        "_value": _value,
        "_logger": logger,
    }


RUNTIME = _runtime()
