"""One guarded call from start to end: step, span, checks, execution, verdict.

A `Call` is made and `check`ed before execution and finished by one of `finish_rejected`,
`finish_raised` or `finish_returned`, so the sync and async paths share everything but the
`await`.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import INVALID_SPAN

from .. import _contract as attr
from .._errors import ToolCallRejected
from . import telemetry as tel
from .checks import (
    Rejection,
    check_conditions,
    check_dependencies,
    check_grounded,
    guard_error,
    in_precedence_order,
)
from .conditions import Failure
from .schema import SchemaFailure
from .tool import Tool
from .trajectory import Trajectory, _current

if TYPE_CHECKING:
    from .guard import Guard

logger = logging.getLogger("toolguard")

_inside_tool: ContextVar[bool] = ContextVar("toolguard_inside_tool", default=False)


class Call:
    __slots__ = (
        "args",
        "blocked",
        "failures",
        "guard",
        "instance",
        "kwargs",
        "mode",
        "name",
        "nested",
        "recording",
        "span",
        "step",
        "token",
        "tool",
        "traj",
        "values",
    )

    def __init__(
        self,
        guard: Guard,
        name: str,
        tool: Tool | None,
        instance: Any,
        step: int | None,
        call_id: str | None,
    ) -> None:
        self.guard = guard
        self.name = name
        self.tool = tool
        self.instance = instance
        # Each Python call on this path costs about as much as a check does (benchmarks/
        # overhead.py), so the hot path reads the context variable and the flags directly.
        self.traj: Trajectory | None = _current.get()
        if self.traj is not None and _inside_tool.get():
            # A guarded tool calling another: the agent emitted only the outer call, so the
            # inner one is checked and traced (below the outer span) but is no step of T.
            self.traj = None
        if step is None and self.traj is not None:
            step = self.traj.next_step()
        self.step = step
        self.mode = (tool.spec.mode if tool is not None else None) or guard.mode
        self.failures: list[Failure] = []
        self.blocked = False
        self.token: object | None = None
        self.nested: Token[bool] | None = None
        self.span = tel.start_call_span(guard.tracer, name)
        # A span records from start to end or never: asked once, not at every step.
        self.recording = self.span is not INVALID_SPAN and self.span.is_recording()
        if self.recording:
            traj = self.traj
            tel.set_attributes(
                self.span,
                tel.call_attributes(
                    name,
                    traj.id if traj else None,
                    step,
                    call_id,
                    traj.conversation_id if traj else None,
                ),
            )

    # -- before execution -------------------------------------------------------------------
    def check(self, raw: dict[str, Any]) -> None:
        """Run the pre-execution checks; afterwards `blocked` says whether to execute."""
        tool, traj = self.tool, self.traj
        assert tool is not None
        block = self.mode == "block"
        if self.guard.record_content and self.recording:
            tel.set_attributes(self.span, {attr.GEN_AI_TOOL_CALL_ARGUMENTS: tel.content(raw)})
        try:
            values, failure = tool.schema.validate(raw), None
        except SchemaFailure as exc:
            values, failure = raw, exc.failure
        self.values = values
        if failure is not None:
            self.failures.append(failure)
            if block:
                self.blocked = True
                return
        if traj is not None and (tool.requires or tool.requires_paths):
            found = check_dependencies(tool, traj, values)
            if found:
                # Blocking stops at the first failure (PROTOCOL 2), also within one check.
                self.failures.extend(found[:1] if block else found)
                if block:
                    self.blocked = True
                    return
        if tool.preconditions:
            found = check_conditions(
                tool.preconditions,
                "requires",
                attr.PRECONDITION,
                {"state": self.guard.state, "instance": self.instance},  # inline: hot path
                values,
                self.guard.fail_open,
                block,
                unvalidated=failure is not None,
            )
            if found:
                self.failures.extend(found)
                if block:
                    self.blocked = True
                    return
        if tool.grounded:
            found = check_grounded(tool, traj, values)
            if found:
                self.failures.extend(found[:1] if block else found)
                self.blocked = block

    def reject_before(self, failure: Failure) -> None:
        """A failure that leaves nothing to execute (unknown tool, unparseable arguments)."""
        self.failures.append(failure)
        self.blocked = True

    def _context(self) -> dict[str, Any]:
        return {"state": self.guard.state, "instance": self.instance}

    def call_parts(self) -> tuple[list[Any], dict[str, Any]]:
        tool = self.tool
        assert tool is not None
        if not tool._posonly and tool._varpos is None:
            # Only keywords: the validated dict itself (the caller unpacks it with **, which
            # copies), not a copy of it.
            return [], self.values
        return tool.call_parts(self.values)

    def enter(self) -> None:
        # The tool runs with the call span current, so spans it makes (HTTP, DB) nest below.
        if self.recording:
            self.token = tel.attach(self.span)
        if self.traj is not None:
            self.nested = _inside_tool.set(True)

    def _leave(self) -> None:
        if self.token is not None:
            tel.detach(self.token)
        if self.nested is not None:
            _inside_tool.reset(self.nested)

    # -- after execution --------------------------------------------------------------------
    def finish_rejected(self) -> Any:
        self._close(executed=False, result=None)
        rejection = Rejection.of(self.name, self.step, self.failures_sorted())
        if self.guard.rejection == "return":
            return rejection
        raise ToolCallRejected(self.name, self.step, self.failures_sorted())

    def finish_raised(self, exc: BaseException) -> Any:
        self._leave()
        self.failures.append(
            Failure(
                attr.STATE_CONSISTENCY,
                "state.exception",
                f"{self.name} raised {type(exc).__name__}: {exc}"[:1024],
                f"`{self.name}` failed: {type(exc).__name__}: {str(exc)[:300]}",
            )
        )
        self._close(executed=True, result=None)
        if self.guard.rejection == "return" and self.mode == "block" and isinstance(exc, Exception):
            return Rejection.of(self.name, self.step, self.failures_sorted(), attr.ALLOWED)
        raise exc

    def finish_returned(self, result: Any) -> Any:
        self._leave()
        tool = self.tool
        assert tool is not None
        fail_open = self.guard.fail_open
        rejected = False
        if tool.spec.error_result is not None:
            try:
                rejected = bool(tool.spec.error_result(result))
            except Exception as exc:
                failure = guard_error(
                    "state.error_result",
                    attr.STATE_CONSISTENCY,
                    "the error_result predicate",
                    exc,
                    fail_open,
                )
                if failure is not None:
                    self.failures.append(failure)
            if rejected:
                self.failures.append(
                    Failure(
                        attr.STATE_CONSISTENCY,
                        "state.error_result",
                        f"the environment rejected the call: {tel.content(result)[:300]}",
                        f"`{self.name}` was rejected by the environment: {str(result)[:300]}",
                    )
                )
        if tool.postconditions:
            context = self._context()
            context["result"] = result
            self.failures.extend(
                check_conditions(
                    tool.postconditions,
                    "ensures",
                    attr.STATE_CONSISTENCY,
                    context,
                    self.values,
                    fail_open,
                    False,
                )
            )
        if (
            not rejected
            and self.traj is not None
            and (tool.produces or tool.invalidates or self.guard.observes_outputs)
        ):
            self._update_trajectory(self.traj, tool, result)
        if self.guard.record_content and self.recording:
            tel.set_attributes(self.span, {attr.GEN_AI_TOOL_CALL_RESULT: tel.content(result)})
        self._close(executed=True, result=result)
        return result

    def _update_trajectory(self, traj: Trajectory, tool: Tool, result: Any) -> None:
        try:
            for kind, value in tool.extract(result):
                traj._produce(kind, value, self.name, self.step)
            for arg, kind in tool.invalidates.items():
                value = self.values.get(arg)
                for item in value if isinstance(value, list | tuple) else (value,):
                    traj._invalidate(kind, item, f"{self.name} at step {self.step}")
            if self.guard.observes_outputs:
                traj.observe(result)
        except Exception:
            # A `produces` callable with a bug must not turn a good call into a crash.
            logger.exception("toolguard: reading the result of %s failed", self.name)

    def failures_sorted(self) -> list[Failure]:
        return in_precedence_order(self.failures)

    def _close(self, executed: bool, result: Any) -> None:
        failures = self.failures_sorted() if self.failures else []
        if not failures:
            decision = attr.ALLOWED
        elif not executed:
            decision = attr.BLOCKED
        elif any(f.cause != attr.STATE_CONSISTENCY for f in failures):
            decision = attr.LOGGED
        else:
            decision = attr.ALLOWED
        if self.traj is not None and self.step is not None:
            self.traj.record(self.step, self.name, decision, failures)
        span = self.span
        if self.recording:
            tel.set_attributes(span, tel.verdict_attributes(decision, failures))
            if decision == attr.BLOCKED or any(f.cause == attr.STATE_CONSISTENCY for f in failures):
                tel.set_error(span, failures[0].message[:256])
        if span is not INVALID_SPAN:  # its end() does nothing; tracing off skips the call
            tel.end_span(span)
        if failures and decision != attr.BLOCKED:
            logger.info(
                "toolguard: %s step %s %s: %s", self.name, self.step, decision, failures[0].message
            )
