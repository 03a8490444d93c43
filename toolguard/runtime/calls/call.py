"""One guarded call's state, from its start to its close: :class:`_Call`.

A call starts (its trajectory, step and span: :meth:`_Call.__init__`), is admitted or
blocked by the checks (``pipeline.py`` runs them), runs, and is closed exactly once:
``finish`` (it returned), ``fail`` (it raised), ``cancel`` (the caller gave up) or blocked.
Closing judges the outcome (``checks/outcome.py``), updates the trajectory (``record.py``)
and writes the verdict on the span. Every entry point of the guard goes through here, so
they all produce the same spans and verdicts. Its public face is ``pending.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextvars import Token
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span
from opentelemetry.util.types import AnyValue

from ... import _contract as contract
from ..._errors import UsageError
from ..checks.outcome import exception_failure
from ..forks.strategies import DRY_RUN_CHECK
from ..telemetry import spans as tel
from ..tools.error_result import default_error_result
from ..trajectories.nesting import _inside_tool, shown
from ..trajectories.trajectory import Trajectory
from ..verdict import Failure, Rejection, Verdict, in_precedence_order
from .dry_run import seen_state
from .start import _NOT_GIVEN, start

if TYPE_CHECKING:
    from ..guard import Guard
    from ..tools.tool import Tool

logger = logging.getLogger("toolguard")

_VALID: dict[str, AnyValue] = {contract.VALID: True, contract.DECISION: contract.ALLOWED}
_NO_FAILURES: list[Failure] = []  # shared, never changed: a valid call's failures
_ALLOWED = contract.ALLOWED  # a global, not a module attribute, on the hot path
# Never a mapping: the default error_result reads no such result as an error (a list, a text)
_NO_MAPPINGS = frozenset({list, tuple, str, bytes, int, float, bool, type(None)})


class _Call:
    """A call's state and its closing; :class:`PendingCall` is its public face. The guard's
    own sync entry points use this class itself: they close every call they start, so a
    finalizer (a fifth of a microsecond per call) would never find one open."""

    __slots__ = (
        "_attrs_due",
        "_decision",
        "_failures",
        "_guard",
        "_instance",
        "_mode",
        "_moved",
        "_nested",
        "_owns_span",
        "_recording",
        "_sent",
        "_sorted",
        "_span",
        "_state",
        "_token",
        "_tool",
        "_traj",
        "arguments",
        "call_id",
        "name",
        "rejection",
        "step",
    )
    # Set by start() (annotated here: the slots are filled there, not in __init__).
    _attrs_due: bool  # on a framework's span only: its call attributes not written yet
    _decision: str | None  # set when the call is closed (with _sorted)
    _failures: tuple[Failure, ...]  # what the checks found, in finding order
    _guard: Guard
    _instance: Any
    _mode: str
    _moved: dict[str, str] | None  # a direct call's keywords held for **kwargs (binding.py)
    _nested: Token[Trajectory | bool] | None
    _owns_span: bool
    _recording: bool
    _sent: Mapping[str, Any]  # the arguments as sent, before the schema converted them
    _sorted: list[Failure]
    _span: Span
    _state: Any
    _token: object | None
    _tool: Tool | None
    _traj: Trajectory | None
    arguments: dict[str, Any]
    call_id: str | None
    name: str
    rejection: Rejection | None
    step: int | None

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
        start(self, guard, name, tool, instance, call_id, trajectory, span, step)

    def _call_attributes(self) -> dict[str, Any]:
        traj = self._traj
        tool = self._tool
        label = tool.span_names[0] if tool is not None else tel.call_span_names(self.name)[0]
        return tel.call_attributes(
            label,
            traj.id if traj else None,
            self.step,
            self.call_id,
            traj.conversation_id if traj else None,
        )

    def __repr__(self) -> str:
        state = f"closed, {self._decision}" if self._decision is not None else "admitted, running"
        return f"PendingCall({self.name!r}, step={self.step}, call_id={self.call_id!r}, {state})"

    @property
    def done(self) -> bool:
        """Whether the call is closed (blocked, finished, failed or cancelled)."""
        return self._decision is not None

    @property
    def verdict(self) -> Verdict | None:
        """The call's verdict once it is closed (built on demand: most callers never ask)."""
        if self._decision is None:
            return None
        return Verdict.of(self.name, self.step, self.call_id, self._decision, self._sorted)

    # -- the arguments the tool runs with ----------------------------------------------------
    def _take_state(self, raw: dict[str, Any]) -> None:
        """A direct call's own value for the tool's ``tg.State`` parameter, out of ``raw``
        (a model's arguments never carry one: dispatch leaves it to the schema check)."""
        assert self._tool is not None
        param = self._tool.state_param
        if param is not None and param in raw:
            self._state = raw.pop(param)

    def _state_value(self) -> Any:
        """What the tool's state is for this call: the direct call's own, or the guard's;
        its fork while this call is made by a tool running on one."""
        return seen_state(self._guard.state if self._state is _NOT_GIVEN else self._state)

    def call_parts(self) -> tuple[list[Any], dict[str, Any]]:
        """The validated arguments as (positional, keyword) for the tool's function."""
        tool = self._tool
        assert tool is not None
        moved = self._moved
        if tool.state_param is not None:
            values = {**self.arguments, tool.state_param: self._state_value()}
            return tool.call_parts(values, moved)
        if not tool._posonly and tool._varpos is None:
            # Only keywords: the validated dict itself (the caller unpacks it with **, which
            # copies), not a copy of it.
            return [], self.arguments
        return tool.call_parts(self.arguments, moved)

    # -- while it runs -----------------------------------------------------------------------
    def _enter(self) -> None:
        # The tool runs with the call span current, so spans it makes (HTTP, DB) nest below.
        if self._recording and self._owns_span:
            self._token = tel.attach(self._span)
        if self._traj is not None:
            self._nested = _inside_tool.set(self._traj)

    def _leave(self) -> None:
        if self._token is not None:
            tel.detach(self._token)
            self._token = None
        if self._nested is not None:
            try:
                _inside_tool.reset(self._nested)
            except ValueError:  # left in another context (a framework's callback thread)
                _inside_tool.set(False)
            self._nested = None

    # -- closing -----------------------------------------------------------------------------
    def finish(self, result: Any, *, error: bool | None = None) -> Verdict:
        """The tool returned ``result`` (the value the contract reads: what ``produces``,
        postconditions and the information check see). ``error=True``: the environment said
        the call failed (an error status, MCP ``isError``); ``None``: the tool's or guard's
        ``error_result`` decides; ``False``: it did not fail."""
        if self._decision is not None or self.rejection is not None:
            self._closed_already("finish")
        self._leave()
        self._finish(result, error)
        verdict = self.verdict
        assert verdict is not None
        return verdict

    def _finish(self, result: Any, error: bool | None) -> None:
        """Judge, record, close: :meth:`finish` of an open call whose span is no longer
        current, without building the verdict (the guard's own entry points)."""
        tool = self._tool
        assert tool is not None
        stages = tool.stages
        guard = self._guard
        traj = self._traj
        if (
            error is None
            and ((type(result) is dict and "error" not in result) or type(result) in _NO_MAPPINGS)
            and stages.plain_judge
            and (guard.error_result is default_error_result or stages.own_error_result)
        ):
            # Nothing for the judge to find (a plain dict without "error", a list, a text:
            # the default rule reads an error only in a mapping): the call stands.
            if traj is not None and (stages.record is not None or guard.observes_outputs):
                stages.record_outcome(self, traj, result, guard.observes_outputs)
        else:
            error, found = stages.judge(self, result, error)
            if found:
                self._failures += tuple(found)
            if not error and traj is not None:
                observe = guard.observes_outputs
                if stages.record is not None or observe:
                    stages.record_outcome(self, traj, result, observe)
        if not self._owns_span and self._attrs_due:
            self._settle_span()
        if guard.record_content and self._recording:
            tel.set_attributes(self._span, {contract.GEN_AI_TOOL_CALL_RESULT: tel.content(result)})
        if self._failures or (traj is not None and traj.ended):
            self._close(executed=True)
            return
        # close, the valid call that ran (most calls): _close's first branch, inline
        self._decision = _ALLOWED
        self._sorted = _NO_FAILURES
        if traj is not None:
            # Trajectory._record of a valid call, inline: nothing else to note (a call in a
            # trajectory has its step)
            verdict = (self.step, self.name, _ALLOWED, _NO_FAILURES, self.call_id)
            traj._verdicts.append(verdict)  # type: ignore[arg-type]
        span = self._span
        if span is INVALID_SPAN:  # tracing off
            return
        # tel.set_attributes and tel.end_span, inline (telemetry never breaks a call)
        if self._recording:
            try:
                span.set_attributes(_VALID)
            except Exception:
                tel.log_failure("toolguard: could not set span attributes")
        if self._owns_span:
            try:
                span.end()
            except Exception:
                tel.log_failure("toolguard: ending a span failed; the tool call is unaffected")

    def fail(self, exc: BaseException) -> Rejection:
        """The tool raised ``exc``: the environment rejected the call (``state_consistency``).
        A cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``: not an
        ``Exception``) is recorded as :meth:`cancel` instead. Returns the rejection to hand
        to the model."""
        if self._decision is not None or self.rejection is not None:
            self._closed_already("fail")
        self._leave()
        if not isinstance(exc, Exception):
            self.cancel()
        else:
            self._failures += (exception_failure(self.name, exc),)
            self._close(executed=True)
        failures = self._sorted or [exception_failure(self.name, exc)]
        assert self._decision is not None
        return Rejection.from_failures(self.name, self.step, self.call_id, self._decision, failures)

    def cancel(self) -> Verdict:
        """The caller gave up on the call (a timeout, a cancelled task): decision
        ``cancelled``. It still counts in T; its validity is what its checks said."""
        if self._decision is not None or self.rejection is not None:
            self._closed_already("cancel")
        self._leave()
        self._close(executed=False, cancelled=True)
        verdict = self.verdict
        assert verdict is not None
        return verdict

    def _reject(self, failure: Failure | None = None) -> None:
        """Close the call as blocked (with ``failure`` added, if given): it must not run."""
        if failure is not None:
            self._failures += (failure,)
        failures = self._close(executed=False)
        self.rejection = Rejection.from_failures(
            self.name, self.step, self.call_id, contract.BLOCKED, failures
        )

    def _closed_already(self, what: str) -> None:
        if self.rejection is not None:
            raise UsageError(
                f"{what}() on a rejected call to {self.name!r}: it was blocked and must not run"
            )
        raise UsageError(
            f"{what}() on a call to {self.name!r} (step {self.step}) that is already "
            f"closed ({self._decision}); a call is closed exactly once"
        )

    def _close(self, executed: bool, cancelled: bool = False) -> list[Failure]:
        """Decide the call's decision, record it in the trajectory and on the span."""
        if not self._owns_span and self._attrs_due:
            self._settle_span()
        if not self._failures and not cancelled:  # valid: most calls
            self._decision = contract.ALLOWED
            self._sorted = _NO_FAILURES
            traj = self._traj
            if traj is not None and self.step is not None:
                if traj.ended:
                    self._after_end()
                else:
                    traj._record(self.step, self.name, contract.ALLOWED, _NO_FAILURES, self.call_id)
            if self._recording:
                tel.set_attributes(self._span, _VALID)
            if self._owns_span and self._span is not INVALID_SPAN:  # tracing off skips it
                tel.end_span(self._span)
            return _NO_FAILURES
        failures = in_precedence_order(self._failures) if self._failures else _NO_FAILURES
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
        self._decision = decision
        self._sorted = failures
        traj = self._traj
        if traj is not None and self.step is not None:
            if traj.ended:
                self._after_end()
            else:
                traj._record(self.step, self.name, decision, failures, self.call_id)
        span = self._span
        content = self._guard.record_content
        if self._recording:
            tel.set_attributes(span, tel.verdict_attributes(decision, failures, content))
            if decision == contract.BLOCKED or any(
                f.cause == contract.STATE_CONSISTENCY for f in failures
            ):
                first = failures[0]
                tel.set_error(span, (first.message if content else first.telemetry_message)[:256])
        if self._owns_span and span is not INVALID_SPAN:  # tracing off skips the call
            tel.end_span(span)
        if failures and decision != contract.BLOCKED:
            first = failures[0]
            text = first.message if content else first.telemetry_message
            logger.info("toolguard: %s step %s %s: %s", shown(self.name), self.step, decision, text)
        return failures

    def _settle_span(self) -> None:
        """At the call's close, before anything of it is written on the framework's span: its
        call attributes go there now, with the verdict that follows. A framework span that
        has ended meanwhile (ADK ends its span of a call cancelled outside the tool
        callbacks, and the run's end cancels the call later) would drop them, and the
        verdict with them; it carries none of them, so the call gets a span of the guard's
        own instead, started and ended here: still one span per call, the verdict kept."""
        self._attrs_due = False
        span = self._span
        try:
            # The API's only word on it: an SDK span records from its start to its end.
            still_open = span.is_recording()
        except Exception:
            still_open = False
        if still_open:
            tel.set_attributes(span, self._call_attributes())
            return
        tool = self._tool
        span_name = tool.span_names[1] if tool is not None else tel.call_span_names(self.name)[1]
        attributes = self._call_attributes()
        if self._guard.record_content and hasattr(self, "_sent"):
            # What admit wrote on the framework's span went with it.
            attributes[contract.GEN_AI_TOOL_CALL_ARGUMENTS] = tel.content(self._sent)
        try:  # in the framework's trace, below its span of this call
            parent = trace.set_span_in_context(span)
        except Exception:
            tel.log_failure("toolguard: could not read the framework's span")
            parent = None
        own = tel.start_span(self._guard.tracer, span_name, parent, attributes)
        self._span = own
        self._owns_span = True
        self._recording = tel.is_recording(own)

    def _after_end(self) -> None:
        assert self._traj is not None
        logger.warning(
            "toolguard: %s (step %s) closed after trajectory %r ended; its summary does not "
            "include this outcome",
            shown(self.name),
            self.step,
            shown(self._traj.id),
        )
