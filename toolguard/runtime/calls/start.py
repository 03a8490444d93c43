"""A call's start: its trajectory, its step and its span (:func:`start`).

Every call begins here, whatever its entry point (the wrapped function, ``guard.call``,
``guard.check``, a framework's adapter): the trajectory it counts in (the current one, or
none for a guarded tool called inside another's run), the step it takes there (reserved by
its call id, the next free one, or from the shared store), its mode, and the span its
checks and verdict are written on (its own, or the framework's span for the same call).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, NoOpTracer, Span

from ..telemetry import spans as tel
from ..trajectories.current import current_var, open_count
from ..trajectories.nesting import _inside_tool, shown, warn_outside
from ..trajectories.trajectory import Trajectory

if TYPE_CHECKING:
    from ..guard import Guard
    from ..tools.tool import Tool
    from .call import _Call

logger = logging.getLogger("toolguard")

_C = TypeVar("_C", bound="_Call")
_NOT_GIVEN: Any = object()  # no state passed to a direct call: the guard's state goes


def start(
    call: _C,
    guard: Guard,
    name: str,
    tool: Tool | None,
    instance: Any,
    call_id: str | None = None,
    trajectory: Trajectory | None = None,
    span: Span | None = None,
    step: int | None = None,
) -> _C:
    """Start ``call`` (a new, uninitialised :class:`_Call`): its trajectory, step and span.
    The pipeline starts its calls with this on ``object.__new__(cls)``, which costs less than
    calling the class (CPython 3.11 packs a class call's arguments into a tuple for
    ``__init__``); ``__init__`` is the same for everyone else. The trailing arguments
    default to None: a direct call gives none of them, and a default costs no bytecode."""
    call._guard = guard
    call.name = name
    call._tool = tool
    call._instance = instance
    call.call_id = call_id
    call.rejection = None
    call._decision = None
    call._failures = ()
    call.arguments = {}
    call._token = None
    call._nested = None
    call._state = _NOT_GIVEN
    call._moved = None
    # The trajectory this call counts in, and its step.
    traj = trajectory
    if traj is None:
        traj = current_var.get()
        if traj is not None and _inside_tool.get() is traj:
            # A guarded tool calling another: the agent emitted only the outer call, so
            # the inner one is checked and traced (below the outer span) but is no step.
            # (A tool that opened a trajectory of its own, a sub-agent's, is not nested.)
            traj = None
        elif traj is None and open_count[0]:
            warn_outside(name)
    elif _inside_tool.get() is traj:
        # The same with the trajectory passed on (acall_batch, the tool_calls helpers, a
        # tool's own trajectory=): whatever the entry point, a nested call is no step.
        traj = None
    if traj is not None:
        if traj.ended:
            logger.warning(
                "toolguard: %s called after trajectory %r ended; checked outside it",
                shown(name),
                shown(traj.id),
            )
            traj = None
        else:
            if traj._provider is not guard.tracer_provider and not traj._provider_warned:
                _warn_providers(traj, guard)
            if traj._registry is not None:  # active now, for the registry's idle timeout
                traj._registry.touch(traj)
            if step is None:
                # Trajectory._take_step, inline: the reserved step of this call id, else
                # the next free one.
                if call_id is not None and traj._reserved:
                    step = traj._take_step(call_id)
                elif not traj._shared:
                    with traj._lock:
                        traj._length += 1
                        step = traj._length
                else:  # kept in a shared store: step and state in one round trip
                    step, failed = traj._begin(
                        call_id, guard.fail_open, tool, guard.observes_outputs
                    )
                    if failed is not None:  # the store did not answer: admit blocks it
                        call._failures = (failed,)
    call._traj = traj
    call.step = step
    call._mode = (tool is not None and tool.own_mode) or guard.mode  # a tool's own, or the guard's
    # The call's span: none while tracing is off, the framework's own when it opened one.
    if span is None:
        tracer = guard.tracer
        makes = guard._makes_spans  # decided with the guard, unless its tracer is the proxy
        if makes is None:  # tel.is_noop, inline: a provider installed later is seen at once
            makes = type(getattr(tracer, "_tracer", None)) is not NoOpTracer
        if not makes:
            call._span = INVALID_SPAN
            call._owns_span = True
            call._recording = False
            return call
        label, span_name = tool.span_names if tool is not None else tel.call_span_names(name)
        if traj is not None:
            attributes = tel.call_attributes(label, traj.id, step, call_id, traj.conversation_id)
            summary, summary_context = traj._span, traj._span_context
        else:
            attributes = tel.call_attributes(label, None, step, call_id, None)
            summary = summary_context = None
        started: Span = tel.start_call_span(
            tracer,
            name,
            span_name,
            guard.reuse_framework_spans,
            attributes,
            summary,
            summary_context,
        )
        if started is not tel.REUSED:
            call._span = started
            call._owns_span = True
            # A span records from start to end or never: asked once, not at every step.
            try:  # tel.is_recording, inline (telemetry never breaks a call)
                call._recording = started is not INVALID_SPAN and started.is_recording()
                return call
            except Exception:
                tel.log_failure(tel.NOT_ASKED)
                call._recording = False
                return call
        span = tel.current_span()
    call._owns_span = False
    call._span = span
    call._recording = tel.is_recording(span)
    # A framework's span: the call's attributes go on it when the call closes, with its
    # verdict (``_Call._settle_span``), so a span the framework ends before that carries
    # none of them and the call gets a span of its own instead.
    call._attrs_due = call._recording
    return call


def _warn_providers(traj: Trajectory, guard: Guard) -> None:
    """A call whose span goes to another tracer provider than its trajectory's summary: the
    report would see one without the other. Said once per trajectory."""
    traj._provider_warned = True  # asked once per trajectory, whatever the answer
    if tel.is_noop(guard.tracer):
        return  # the guard's calls make no spans: nothing to split from the summary
    installed = trace.get_tracer_provider()
    if (traj._provider or installed) is (guard.tracer_provider or installed):
        return  # one of them is the global provider, which is the other: the same backend
    logger.warning(
        "toolguard: trajectory %r writes its summary to %s, but this guard's calls go to %s: "
        "open it with guard.trajectory(...) or tg.trajectory(..., guard=guard)",
        shown(traj.id),
        "the global tracer provider" if traj._provider is None else "its own tracer provider",
        "the global one" if guard.tracer_provider is None else "the guard's tracer_provider",
    )
