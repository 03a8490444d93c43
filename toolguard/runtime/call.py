"""One guarded call in two phases: checked before it runs, told how it ended after.

``guard.check(...)`` makes a :class:`PendingCall`: its step, its span and the pre-execution
checks. A blocked one is closed at once and carries its :class:`Rejection`; an admitted one
is run by whoever owns the tool (the guard itself, or an agent framework) and closed by
``finish`` (it returned), ``fail`` (it raised) or ``cancel`` (the caller gave up). Every
entry point of the guard goes through here, so they all produce the same spans and verdicts.
"""

from __future__ import annotations

import logging
from contextvars import Token
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import INVALID_SPAN, Span

from .. import _contract as contract
from .._errors import UsageError
from . import telemetry as tel
from .checks import (
    check_conditions,
    check_dependencies,
    check_grounded,
    check_schema,
    error_result_failure,
    exception_failure,
    guard_error,
)
from .fork import DRY_RUN_CHECK
from .nesting import _inside_tool as _inside_tool  # dryrun.py reads it here
from .nesting import shown, warn_outside
from .tool import Tool
from .trajectory import Trajectory, _current, open_trajectories
from .verdict import Failure, Rejection, Verdict, in_precedence_order

if TYPE_CHECKING:
    from .guard import Guard

logger = logging.getLogger("toolguard")

_NOT_GIVEN: Any = object()  # no state passed to a direct call: the guard's state goes


class PendingCall:
    """A checked call. ``rejection`` is set when it must not run (it is already closed);
    otherwise run it (``call_parts()`` gives the validated arguments back as ``args, kwargs``)
    and close it with exactly one of :meth:`finish`, :meth:`fail` or :meth:`cancel`.

    As a context manager (``with`` or ``async with``) the call's span is current while the
    tool runs, an exception leaving the block is :meth:`fail`, and a block left without
    closing the call cancels it (with a warning). A pending call dropped unclosed is
    cancelled the same way when it is garbage-collected.
    """

    __slots__ = (
        "__weakref__",
        "arguments",
        "blocked",
        "call_id",
        "decision",
        "failures",
        "guard",
        "instance",
        "mode",
        "name",
        "nested",
        "owns_span",
        "recording",
        "rejection",
        "sorted_failures",
        "span",
        "state_given",
        "step",
        "token",
        "tool",
        "traj",
    )

    def __init__(
        self,
        guard: Guard,
        name: str,
        tool: Tool | None,
        instance: Any = None,
        call_id: str | None = None,
        trajectory: Trajectory | None = None,
        span: Span | None = None,
        step: int | None = None,
    ) -> None:
        self.guard = guard
        self.name = name
        self.tool = tool
        self.instance = instance
        self.call_id = call_id
        self.rejection: Rejection | None = None
        self.decision: str | None = None  # set when the call is closed
        self.sorted_failures: list[Failure] = []
        # Each Python call on this path costs about as much as a check does (benchmarks/
        # overhead.py), so the hot path reads the context variable and the flags directly.
        traj = trajectory
        if traj is None:
            traj = _current.get()
            if traj is not None and _inside_tool.get():
                # A guarded tool calling another: the agent emitted only the outer call, so
                # the inner one is checked and traced (below the outer span) but is no step.
                traj = None
            elif traj is None and open_trajectories():
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
                if step is None:
                    step = traj.step_for(call_id)
                if traj._registry is not None:
                    traj._registry.touch(traj)
        self.traj = traj
        self.step = step
        self.mode = (tool.spec.mode if tool is not None else None) or guard.mode
        self.failures: list[Failure] = []
        self.arguments: dict[str, Any] = {}
        self.blocked = False
        self.token: object | None = None
        self.nested: Token[Trajectory | bool] | None = None
        self.state_given: Any = _NOT_GIVEN
        started = False  # a span of the guard's own: its call attributes given at its start
        if span is None:
            tracer = guard.tracer
            if tel.is_noop(tracer):
                span = INVALID_SPAN
                self.owns_span = True
            else:
                span = tel.start_call_span(
                    tracer,
                    name,
                    guard.reuse_framework_spans,
                    self._call_attributes(),
                    traj._span if traj else None,
                )
                self.owns_span = span is not tel.REUSED
                if self.owns_span:
                    started = True
                else:
                    span = tel.current_span()
        else:
            self.owns_span = False
        self.span = span
        # A span records from start to end or never: asked once, not at every step.
        self.recording = span is not INVALID_SPAN and span.is_recording()
        if self.recording and not started:  # a framework's span: the attributes go on it
            tel.set_attributes(span, self._call_attributes())

    def _call_attributes(self) -> dict[str, Any]:
        traj = self.traj
        return tel.call_attributes(
            self.name,
            traj.id if traj else None,
            self.step,
            self.call_id,
            traj.conversation_id if traj else None,
        )

    def __repr__(self) -> str:
        state = f"closed, {self.decision}" if self.decision is not None else "admitted, running"
        return f"PendingCall({self.name!r}, step={self.step}, call_id={self.call_id!r}, {state})"

    @property
    def done(self) -> bool:
        return self.decision is not None

    @property
    def verdict(self) -> Verdict | None:
        """The call's verdict once it is closed (built on demand: most callers never ask)."""
        if self.decision is None:
            return None
        return Verdict.of(self.name, self.step, self.call_id, self.decision, self.sorted_failures)

    # -- before execution -------------------------------------------------------------------
    def run_checks(self, raw: dict[str, Any]) -> None:
        """The pre-execution checks; a blocked call is closed here and gets its rejection."""
        tool, traj = self.tool, self.traj
        assert tool is not None
        block = self.mode == "block"
        if block and self.guard._compiled and not self.guard.record_content:
            code = tool._compiled_code  # the same checks, compiled for this tool (compiled.py)
            if code:
                return code.run_checks(self, raw)  # type: ignore[no-any-return]
        if self.guard.record_content and self.recording:
            tel.set_attributes(self.span, {contract.GEN_AI_TOOL_CALL_ARGUMENTS: tel.content(raw)})
        values, failure = check_schema(tool, raw)
        self.arguments = values
        if failure is not None:
            self.failures.append(failure)
            if block:
                return self.reject()
        if traj is not None and (tool.refs or tool.ref_paths):
            found = check_dependencies(tool, traj, values)
            if found:
                # Blocking stops at the first failure (PROTOCOL 2), also within one check.
                self.failures.extend(found[:1] if block else found)
                if block:
                    return self.reject()
        if tool.preconditions:
            found = check_conditions(
                tool.preconditions,
                "precondition",
                contract.PRECONDITION,
                {"state": self.guard.state, "instance": self.instance},  # inline: hot path
                values,
                self.guard.fail_open,
                block,
                unvalidated=failure is not None,
                record_content=self.guard.record_content,
            )
            if found:
                self.failures.extend(found)
                if block:
                    return self.reject()
        if tool.grounded:
            found = check_grounded(tool, traj, values)
            if found:
                self.failures.extend(found[:1] if block else found)
                if block:
                    return self.reject()
        return None

    def reject(self, failure: Failure | None = None) -> None:
        """Close the call as blocked (with ``failure`` added, if given): it must not run."""
        if failure is not None:
            self.failures.append(failure)
        self.blocked = True
        failures = self._close(executed=False)
        self.rejection = Rejection.from_failures(
            self.name, self.step, self.call_id, contract.BLOCKED, failures
        )

    def take_state(self, raw: dict[str, Any]) -> None:
        """A direct call's own value for the tool's ``tg.State`` parameter, out of ``raw``
        (a model's arguments never carry one: dispatch leaves it to the schema check)."""
        assert self.tool is not None
        param = self.tool.state_param
        if param is not None and param in raw:
            self.state_given = raw.pop(param)

    def state_value(self) -> Any:
        """What the tool's state is for this call: the direct call's own, or the guard's."""
        return self.guard.state if self.state_given is _NOT_GIVEN else self.state_given

    def call_parts(self) -> tuple[list[Any], dict[str, Any]]:
        """The validated arguments as (positional, keyword) for the tool's function."""
        tool = self.tool
        assert tool is not None
        if tool.state_param is not None:
            return tool.call_parts({**self.arguments, tool.state_param: self.state_value()})
        if not tool._posonly and tool._varpos is None:
            # Only keywords: the validated dict itself (the caller unpacks it with **, which
            # copies), not a copy of it.
            return [], self.arguments
        return tool.call_parts(self.arguments)

    def enter(self) -> None:
        # The tool runs with the call span current, so spans it makes (HTTP, DB) nest below.
        if self.recording and self.owns_span:
            self.token = tel.attach(self.span)
        if self.traj is not None:
            self.nested = _inside_tool.set(self.traj)

    def leave(self) -> None:
        if self.token is not None:
            tel.detach(self.token)
            self.token = None
        if self.nested is not None:
            try:
                _inside_tool.reset(self.nested)
            except ValueError:  # left in another context (a framework's callback thread)
                _inside_tool.set(False)
            self.nested = None

    def __enter__(self) -> PendingCall:
        if self.rejection is None:
            self.enter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.leave()
        if self.decision is not None:
            return
        if exc is not None:
            self.fail(exc)
        else:
            logger.warning(
                "toolguard: %s (step %s) left its block without finish() or fail(); "
                "recorded as cancelled",
                shown(self.name),
                self.step,
            )
            self.cancel()

    async def __aenter__(self) -> PendingCall:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __del__(self) -> None:
        try:
            if self.decision is None and hasattr(self, "failures"):
                logger.warning(
                    "toolguard: %s (step %s) was dropped without finish(), fail() or "
                    "cancel(); recorded as cancelled",
                    shown(self.name),
                    self.step,
                )
                self.cancel()
        except Exception:  # never raise from a finalizer
            pass

    # -- after execution --------------------------------------------------------------------
    def finish(self, result: Any, *, error: bool | None = None) -> Verdict:
        """The tool returned ``result`` (the value the contract reads: what ``produces``,
        postconditions and the information check see). ``error=True``: the environment said
        the call failed (an error status, MCP ``isError``); ``None``: the tool's or guard's
        ``error_result`` decides; ``False``: it did not fail."""
        self._open_or_raise("finish")
        self.leave()
        tool = self.tool
        assert tool is not None
        fail_open = self.guard.fail_open
        if error is None:
            detect = tool.spec.error_result
            if detect is None:
                detect = self.guard.error_result
            if detect:
                try:
                    error = bool(detect(result))
                except Exception as exc:
                    failure = guard_error(
                        "state.error_result",
                        contract.STATE_CONSISTENCY,
                        "the error_result predicate",
                        exc,
                        fail_open,
                        self.guard.record_content,
                    )
                    if failure is not None:
                        self.failures.append(failure)
        if error:
            self.failures.append(error_result_failure(self.name, result))
        if tool.postconditions:
            context = {"state": self.guard.state, "instance": self.instance, "result": result}
            self.failures.extend(
                check_conditions(
                    tool.postconditions,
                    "postcondition",
                    contract.STATE_CONSISTENCY,
                    context,
                    self.arguments,
                    fail_open,
                    False,
                    record_content=self.guard.record_content,
                )
            )
        traj = self.traj
        if (
            not error
            and traj is not None
            and (tool.produces or tool.invalidates or self.guard.observes_outputs)
        ):
            self._update_trajectory(traj, tool, result)
        if self.guard.record_content and self.recording:
            tel.set_attributes(self.span, {contract.GEN_AI_TOOL_CALL_RESULT: tel.content(result)})
        self._close(executed=True)
        verdict = self.verdict
        assert verdict is not None
        return verdict

    def fail(self, exc: BaseException) -> Rejection:
        """The tool raised ``exc``: the environment rejected the call (``state_consistency``).
        A cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``: not an
        ``Exception``) is recorded as :meth:`cancel` instead. Returns the rejection to hand
        to the model."""
        self._open_or_raise("fail")
        self.leave()
        if not isinstance(exc, Exception):
            self.cancel()
        else:
            self.failures.append(exception_failure(self.name, exc))
            self._close(executed=True)
        failures = self._sorted() or [exception_failure(self.name, exc)]
        assert self.decision is not None
        return Rejection.from_failures(self.name, self.step, self.call_id, self.decision, failures)

    def cancel(self) -> Verdict:
        """The caller gave up on the call (a timeout, a cancelled task): decision
        ``cancelled``. It still counts in T; its validity is what its checks said."""
        self._open_or_raise("cancel")
        self.leave()
        self._close(executed=False, cancelled=True)
        verdict = self.verdict
        assert verdict is not None
        return verdict

    def _open_or_raise(self, what: str) -> None:
        if self.rejection is not None:
            raise UsageError(
                f"{what}() on a rejected call to {self.name!r}: it was blocked and must not run"
            )
        if self.decision is not None:
            raise UsageError(
                f"{what}() on a call to {self.name!r} (step {self.step}) that is already "
                f"closed ({self.decision}); a call is closed exactly once"
            )

    def _update_trajectory(self, traj: Trajectory, tool: Tool, result: Any) -> None:
        try:
            for kind, value in tool.extract(result):
                traj._produce(kind, value, self.name, self.step)
            for arg, kind in tool.invalidates.items():
                value = self.arguments.get(arg)
                for item in value if isinstance(value, list | tuple) else (value,):
                    traj._invalidate(kind, item, f"{self.name} at step {self.step}")
            if self.guard.observes_outputs:
                traj.observe(result)
        except Exception:
            # A `produces` callable with a bug must not turn a good call into a crash.
            logger.exception("toolguard: reading the result of %s failed", shown(self.name))

    def _sorted(self) -> list[Failure]:
        return in_precedence_order(self.failures) if self.failures else []

    def _close(self, executed: bool, cancelled: bool = False) -> list[Failure]:
        failures = self._sorted()
        if cancelled:
            decision = contract.CANCELLED
        elif not failures:
            decision = contract.ALLOWED
        elif not executed:
            decision = contract.BLOCKED
        elif any(
            f.cause != contract.STATE_CONSISTENCY or f.check == DRY_RUN_CHECK for f in failures
        ):
            # A dry run's failure was known before the call ran: it ran because of log mode.
            decision = contract.LOGGED
        else:
            decision = contract.ALLOWED
        self.decision = decision
        self.sorted_failures = failures
        traj = self.traj
        if traj is not None and self.step is not None:
            if traj.ended:
                logger.warning(
                    "toolguard: %s (step %s) closed after trajectory %r ended; its summary "
                    "does not include this outcome",
                    shown(self.name),
                    self.step,
                    shown(traj.id),
                )
            else:
                traj.record(self.step, self.name, decision, failures, self.call_id)
        span = self.span
        if self.recording:
            content = self.guard.record_content
            tel.set_attributes(span, tel.verdict_attributes(decision, failures, content))
            if decision == contract.BLOCKED or any(
                f.cause == contract.STATE_CONSISTENCY for f in failures
            ):
                first = failures[0]
                tel.set_error(span, (first.message if content else first.telemetry_message)[:256])
        if self.owns_span and span is not INVALID_SPAN:  # tracing off skips the call
            tel.end_span(span)
        if failures and decision != contract.BLOCKED:
            first = failures[0]
            text = first.message if self.guard.record_content else first.telemetry_message
            logger.info("toolguard: %s step %s %s: %s", shown(self.name), self.step, decision, text)
        return failures
