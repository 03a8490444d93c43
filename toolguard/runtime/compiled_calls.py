"""The entry points :mod:`compiled` generates: the wrapped function called directly, dispatch
by name, and the steps they share (prologue, span, step, run, close).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .tool import Tool

if TYPE_CHECKING:
    pass
from .compiled_source import Source, emit_checks, emit_post


def _emit_prologue(src: Source, nested_fallback: str) -> None:
    """Mode, content recording: the general path for the unusual."""
    src("guard = GUARD")
    src('if (SPEC.mode or guard.mode) != "block" or guard.record_content:')
    with src.indent():
        src(nested_fallback)


def _emit_span(src: Source, call_id: str, reused: str) -> None:
    """The call span: none from a no-op tracer (what start_call_span does, inline)."""
    src("tracer = guard.tracer")
    src("kind = type(tracer)")
    src("if kind is _ProxyTracer:")
    with src.indent():
        src('kind = type(getattr(tracer, "_tracer", None))')
    src("if kind is _NoOpTracer:")
    with src.indent():
        src("span = _INVALID_SPAN")
        src("recording = False")
    src("else:")
    with src.indent():
        src(
            "attributes = _call_attributes(NAME, traj.id if traj is not None else None, step, "
            f"{call_id}, traj.conversation_id if traj is not None else None)"
        )
        src(
            "span = _start_call_span(tracer, NAME, guard.reuse_framework_spans, attributes, "
            "traj._span if traj is not None else None)"
        )
        src("if span is _REUSED:")
        with src.indent():
            src(reused)
        src("recording = span is not _INVALID_SPAN and span.is_recording()")


def _emit_step(src: Source, call_id: str | None) -> None:
    """The step a call takes (Trajectory.step_for inline) and the registry's clock."""
    src("if traj is not None:")
    with src.indent():
        if call_id is not None:
            src("if step is None:")
            src.depth += 1
            src(f"if {call_id} is not None and traj._reserved:")
            with src.indent():
                src(f"step = traj.step_for({call_id})")
            src("else:")
            src.depth += 1
        src("with traj._lock:")
        with src.indent():
            src("traj._length += 1")
            src("step = traj._length")
        if call_id is not None:
            src.depth -= 2
        src("if traj._registry is not None:")
        with src.indent():
            src("traj._registry.touch(traj)")
    if call_id is None:
        src("else:")
        with src.indent():
            src("step = None")


def _emit_close(src: Source, call_id: str, in_pending: bool) -> None:
    """Close the call that ran: the plain success inline, anything else by PendingCall."""
    src("if failures is not None or (traj is not None and traj.ended):")
    with src.indent():
        if in_pending:
            src("pending.failures = failures or []")
            src("pending._close(executed=True)")
        else:
            src(
                f"_close_ran(guard, owner, {call_id}, traj, step, span, recording, values, "
                "failures or [])"
            )
    src("else:")
    with src.indent():
        if in_pending:
            src("pending.decision = _ALLOWED")
        src("if traj is not None:")
        with src.indent():
            src(f"traj._verdicts.append((step, NAME, _ALLOWED, [], {call_id}))")
        src("if recording:")
        with src.indent():
            src("try:")  # telemetry.set_attributes, inline
            with src.indent():
                src("span.set_attributes(_VALID_ATTRIBUTES)")
            src("except Exception:")
            with src.indent():
                src('_logger.exception("toolguard: could not set span attributes")')
        src("if span is not _INVALID_SPAN:")
        with src.indent():
            src("try:")  # telemetry.end_span, inline
            with src.indent():
                src("span.end()")
            src("except Exception:")
            with src.indent():
                src(
                    '_logger.exception("toolguard: ending a span failed; the tool call is '
                    'unaffected")'
                )


def _emit_run(src: Source, tool: Tool, call_id: str, fn: str, dispatch: bool) -> None:
    """Run the admitted call (the span current, nested calls marked), then close it.

    A sync call keeps its state in locals. An async one keeps it in a PendingCall, as the
    general path does: a coroutine dropped without being awaited is then cancelled when the
    PendingCall is collected, exactly as there."""
    in_pending = tool.is_async
    if in_pending:
        for local in ("guard", "traj", "step", "span", "recording"):
            src(f"{local} = pending.{local}")
        src("owner = pending.instance")
        src("values = pending.arguments")
    if tool._posonly or tool._varpos is not None:
        src("a, k = TOOL.call_parts(values)")
        invoke = f"{fn}(*a, **k)"
    else:
        invoke = f"{fn}(**values)"
    if in_pending:
        src("pending.enter()")
        src("try:")
        with src.indent():
            src(f"result = await {invoke}")
        src("except BaseException as exc:")
        with src.indent():
            src("rejection = pending.fail(exc)")
            if dispatch:
                src("if isinstance(exc, Exception):")
                with src.indent():
                    src("return rejection")
            src("raise")
        src("pending.leave()")
    else:
        src("token = None")
        src("if recording:")
        with src.indent():
            src("try:")  # telemetry.attach, inline
            with src.indent():
                src("token = _otel_attach(_set_span_in_context(span))")
            src("except Exception:")
            with src.indent():
                src('_logger.exception("toolguard: could not make the span current")')
        src("nested = _inside_set(traj) if traj is not None else None")
        src("try:")
        with src.indent():
            src(f"result = {invoke}")
        src("except BaseException as exc:")
        with src.indent():
            src("_leave(token, nested)")
            src(
                f"rejection = _fail(guard, owner, {call_id}, traj, step, span, recording, "
                "values, exc)"
            )
            if dispatch:
                src("if isinstance(exc, Exception):")
                with src.indent():
                    src("return rejection")
            src("raise")
        src("if token is not None:")
        with src.indent():
            src("try:")  # telemetry.detach, inline
            with src.indent():
                src("_otel_detach(token)")
            src("except Exception:")
            with src.indent():
                src('_logger.exception("toolguard: could not restore the previous context")')
        src("if nested is not None:")
        with src.indent():
            src("try:")
            with src.indent():
                src("_inside_reset(nested)")
            src("except ValueError:  # left in another context")
            with src.indent():
                src("_inside_set(False)")
    if in_pending:
        # Dropped by an exception out of here, the PendingCall is cancelled when collected.
        emit_post(src, tool)
        _emit_close(src, call_id, in_pending)
    else:
        src("failures = None")
        src("try:")
        with src.indent():
            emit_post(src, tool)
        src("except BaseException:")
        with src.indent():
            # What the general path's PendingCall does when such an exception leaves
            # finish(): dropped unclosed, it is cancelled with its failures so far.
            src(f"_abandon(guard, owner, {call_id}, traj, step, span, recording, values, failures)")
            src("raise")
        _emit_close(src, call_id, in_pending)
    src("return result")


def emit_make_direct(src: Source, tool: Tool) -> None:
    """The wrapt wrapper of a function called directly: its result, or ToolCallRejected."""
    src("def make_direct(GUARD, FIXED, general, proceed):")
    with src.indent():
        src("def direct(wrapped, instance, args, kwargs):")
        with src.indent():
            fallback = "return general(wrapped, instance, args, kwargs)"
            src("traj = _current_get()")
            src("if traj is not None:")
            with src.indent():
                src("if traj.ended or _inside_get():")
                with src.indent():
                    src(fallback)
            src("elif _open[0]:")
            with src.indent():
                src(fallback)
            _emit_prologue(src, fallback)
            src("owner = FIXED if FIXED is not None else instance")
            _emit_step(src, None)
            _emit_span(
                src,
                "None",
                "return proceed(_PendingCall(guard, NAME, TOOL, owner, None, traj, None, step), "
                "wrapped, args, kwargs)",
            )
            _emit_admission(src, tool, "None", _emit_bound_arguments)
            src("if failure is not None:")
            with src.indent():
                _emit_blocked(src, "None")
                if tool.is_async:
                    src("return _raise_async(rejection)")
                else:
                    src("raise _ToolCallRejected(rejection)")
            if tool.is_async:
                src(
                    "return run(_made(guard, TOOL, owner, None, traj, step, span, recording, "
                    "values), wrapped)"
                )
            else:
                _emit_run(src, tool, "None", "wrapped", dispatch=False)
        if tool.is_async:
            src("async def run(pending, wrapped):")
            with src.indent():
                _emit_run(src, tool, "None", "wrapped", dispatch=False)
        src("return direct")
    src("")


def emit_make_dispatch(src: Source, tool: Tool) -> None:
    """guard.call / acall by name: the result, or the Rejection (also when the tool raised)."""
    src("def make_dispatch(GUARD, FN, OWNER, general, proceed):")
    with src.indent():
        src("def dispatch(arguments, call_id, trajectory, step):")
        with src.indent():
            fallback = "return general(arguments, call_id, trajectory, step)"
            src("traj = trajectory")
            src("if traj is None:")
            with src.indent():
                src("traj = _current_get()")
                src("if traj is None:")
                with src.indent():
                    src("if _open[0]:")
                    with src.indent():
                        src(fallback)
                src("elif _inside_get():")
                with src.indent():
                    src(fallback)
            src("elif _inside_get():")  # nested with its trajectory passed on: the general rule
            with src.indent():
                src(fallback)
            src("if traj is not None and traj.ended:")
            with src.indent():
                src(fallback)
            _emit_prologue(src, fallback)
            src("owner = OWNER")
            _emit_step(src, "call_id")
            _emit_span(
                src,
                "call_id",
                "return proceed(_PendingCall(guard, NAME, TOOL, owner, call_id, traj, None, "
                "step), arguments)",
            )
            _emit_admission(src, tool, "call_id", _emit_parsed_arguments)
            src("if failure is not None:")
            with src.indent():
                _emit_blocked(src, "call_id")
                src("return _value(rejection)" if tool.is_async else "return rejection")
            if tool.is_async:
                src(
                    "return run(_made(guard, TOOL, owner, call_id, traj, step, span, recording, "
                    "values))"
                )
            else:
                _emit_run(src, tool, "call_id", "FN", dispatch=True)
        if tool.is_async:
            src("async def run(pending):")
            with src.indent():
                src("call_id = pending.call_id")
                _emit_run(src, tool, "call_id", "FN", dispatch=True)
        src("return dispatch")
    src("")


def _emit_admission(
    src: Source, tool: Tool, call_id: str, emit_raw: Callable[[Source], None]
) -> None:
    """``raw`` (by ``emit_raw``), then the checks into ``values`` and ``failure``; an
    exception meanwhile cancels the call."""
    src("raw = None")
    src("try:")
    with src.indent():
        src("failure = None")
        emit_raw(src)
        src("if failure is None:")
        with src.indent():
            emit_checks(src, tool)
        src("else:")
        with src.indent():
            src("values = raw")
    src("except BaseException:")
    with src.indent():
        src(f"_cancel(guard, owner, {call_id}, traj, step, span, recording, raw)")
        src("raise")


def _emit_blocked(src: Source, call_id: str) -> None:
    """The rejection of a call its checks failed, the call closed."""
    src(
        f"rejection = _blocked(guard, owner, {call_id}, traj, step, span, recording, "
        "values, failure)"
    )


def _emit_bound_arguments(src: Source) -> None:
    """A direct call's ``raw``: its positional and keyword arguments bound by name."""
    src("if args:")
    with src.indent():
        src("try:")
        with src.indent():
            src("raw = TOOL.bind(args, kwargs)")
        src("except TypeError as exc:")
        with src.indent():
            src("failure = _bind_failure(TOOL, exc)")
            src("raw = {}")
    src("else:")
    with src.indent():
        src("raw = kwargs")


def _emit_parsed_arguments(src: Source) -> None:
    """A dispatched call's ``raw``: a dict copied, or JSON text parsed."""
    src("if type(arguments) is dict:")
    with src.indent():
        src("raw = dict(arguments)")
    src("else:")
    with src.indent():
        src("try:")
        with src.indent():
            src("raw = _parse_arguments(NAME, arguments)")
        src("except _SchemaFailure as exc:")
        with src.indent():
            src("failure = exc.failure")
            src("raw = {}")
