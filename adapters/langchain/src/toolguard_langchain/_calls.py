"""One tool call through the guard: checked, run by the framework, finished with its answer.

The framework owns the tool: the guard's ``check`` judges the call before the tool node's
handler runs it, and the handler's ``ToolMessage`` (or the exception it raised) closes the
pending call. A rejection is answered like any failed call, with an error ``ToolMessage``;
the tool's own exception is re-raised unchanged, so ``handle_tool_errors``, an error or retry
middleware and the graph decide about it exactly as they would without the guard. A call the
framework refuses after the check, before the tool runs (its own argument validation, a name
the tool node has no tool of), did not execute: it is closed as blocked in either mode, and
the model keeps the framework's answer.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import toolguard as tg
from opentelemetry import trace

from ._call_span import CallSpan
from ._contracts import KnownTools, undeclarable
from ._framework import BaseTool, Command, GraphBubbleUp, GraphInterrupt, ToolCallRequest
from ._history import RawResults
from ._raw import Cell, RunningCopies, capture, capturing_copy, release
from ._results import (
    is_error,
    message_content,
    no_such_tool,
    outcome,
    own_result,
    refused_arguments,
    rejection_message,
)
from ._turns import TurnLedger

logger = logging.getLogger("toolguard")

# True while the framework runs a guarded call's tool. An agent run inside it (a sub-agent
# used as a tool) is part of that call: its calls are checked and traced below it, but the
# agent emitted only the outer call, so they take no step and open no trajectory.
_inside: ContextVar[bool] = ContextVar("toolguard_langchain_inside_call", default=False)


def inside_guarded_call() -> bool:
    return _inside.get()


Answer = Any  # a ToolMessage, a Command, or a list of them
Handler = Callable[[ToolCallRequest], Answer]
AsyncHandler = Callable[[ToolCallRequest], Awaitable[Answer]]


class GuardedCalls:
    """The per-call half of the adapter, shared by the middleware and a plain ``ToolNode``."""

    def __init__(self, guard: tg.Guard, known: KnownTools, ledger: TurnLedger) -> None:
        self.guard = guard
        self.known = known
        self.ledger = ledger
        self.raw = RawResults()  # for the next runs of a conversation (_history.py)
        self.keep_raw = False  # set where those runs bind their history (the middleware)
        self._warned: set[str] = set()
        self.copies = RunningCopies()  # the tools' running copies, while the tools live

    def run(self, request: ToolCallRequest, handler: Handler, traj: tg.Trajectory | None) -> Any:
        traced = _traced(self.guard)
        with active(self.guard, traj, traced):
            started = self._start(request, traj, traced)
            if started is None:
                answer = handler(request)
                self._framework_answered(request, answer, traj)
                return answer
            if isinstance(started, tg.Rejection):  # a tool the guard cannot judge
                return rejection_message(started, request.tool_call)
            span, pending = started
            if pending.rejection is not None:
                return rejection_message(pending.rejection, request.tool_call)
            try:
                request = self._plain(request)
                with pending:
                    inside = _inside.set(True)
                    raw, kept = capture(span)
                    try:
                        answer = handler(request)
                    except GraphBubbleUp as exc:
                        _bubbled(pending, exc, traj, request.tool_call.get("id"))
                        raise
                    except BaseException:
                        _refused(pending, request, raw)  # handle_tool_errors=False
                        raise
                    finally:
                        release(kept)
                        _inside.reset(inside)
                    self._finish(pending, request, answer, raw)
            finally:
                if span is not None:
                    span.close()  # after the verdict: the span ends with it
            return answer

    async def arun(
        self, request: ToolCallRequest, handler: AsyncHandler, traj: tg.Trajectory | None
    ) -> Any:
        traced = _traced(self.guard)
        with active(self.guard, traj, traced):
            started = self._start(request, traj, traced)
            if started is None:
                answer = await handler(request)
                self._framework_answered(request, answer, traj)
                return answer
            if isinstance(started, tg.Rejection):  # a tool the guard cannot judge
                return rejection_message(started, request.tool_call)
            span, pending = started
            if pending.rejection is not None:
                return rejection_message(pending.rejection, request.tool_call)
            try:
                request = self._plain(request)
                async with pending:
                    inside = _inside.set(True)
                    raw, kept = capture(span)
                    try:
                        answer = await handler(request)
                    except GraphBubbleUp as exc:
                        _bubbled(pending, exc, traj, request.tool_call.get("id"))
                        raise
                    except BaseException:
                        _refused(pending, request, raw)  # handle_tool_errors=False
                        raise
                    finally:
                        release(kept)
                        _inside.reset(inside)
                    self._finish(pending, request, answer, raw)
            finally:
                if span is not None:
                    span.close()  # after the verdict: the span ends with it
            return answer

    # -- the halves run and arun share: before the handler, and after it -----------------
    def _start(
        self, request: ToolCallRequest, traj: tg.Trajectory | None, traced: bool
    ) -> tuple[CallSpan | None, tg.PendingCall] | tg.Rejection | None:
        """Fix the call's step (its turn's) and check it: its span (made only while the
        guard's spans record) and the pending call, whose span is closed already when the
        guard rejected it. None for a tool neither the tool node nor the guard knows: the
        framework answers that call itself. A rejection, recorded, for a tool the guard
        cannot judge (``KnownTools.ensure``)."""
        call = request.tool_call
        name, call_id = call["name"], call.get("id")
        if traj is not None and call_id:
            self.ledger.account(traj, request.state, call_id)
        tool = request.tool
        if tool is None and not self.known.knows(name):
            return None
        if tool is not None:
            problem = self.known.ensure(tool)
            if problem is not None:
                return _undeclarable(self.guard, name, problem, call_id, traj)
        span = self._span(name) if traced else None
        pending = self.guard.check(
            name, call.get("args"), call_id=call_id, trajectory=traj, span=span
        )
        if pending.rejection is not None and span is not None:
            span.close()
        return span, pending

    def _finish(
        self, pending: tg.PendingCall, request: ToolCallRequest, answer: Any, raw: Cell
    ) -> None:
        """The framework's answer judged; with ``keep_raw``, the tool's own result kept for
        the conversation's next runs (``_history.py``): the value this judgement read."""
        call_id = request.tool_call.get("id")
        if _refused(pending, request, raw, answer):
            return
        own = own_result(raw, request.tool)
        result, error = outcome(answer, call_id, own)
        pending.finish(result, error=error)
        if self.keep_raw and own[0] and not error and call_id:
            content = message_content(answer, call_id)
            self.raw.keep(call_id, request.tool_call["name"], own[1], content)

    def _span(self, name: str) -> CallSpan:
        """The call's span, bound when the tool runs (``_call_span.py``); made only while
        the guard's spans record (else the guard makes none)."""
        return CallSpan(self.guard.tracer, name, adopt=self.guard.reuse_framework_spans)

    def _framework_answered(
        self, request: ToolCallRequest, answer: Any, traj: tg.Trajectory | None
    ) -> None:
        """A tool neither the tool node nor the guard knows: the framework answers it (its
        "not a valid tool" message), and that refusal is a step like the guard's own."""
        name, call_id = request.tool_call["name"], request.tool_call.get("id")
        if is_error(answer, call_id):
            self.guard.record_rejection(
                name,
                "no tool of that name among the agent's tools (refused by the framework)",
                call_id=call_id,
                trajectory=traj,
            )
        elif name not in self._warned:
            # Another middleware ran a tool the guard was never told about.
            self._warned.add(name)
            logger.warning(
                "toolguard: tool %r ran unchecked and uncounted: the guard does not know it "
                "(declare it with guard.declare or toolguard_langchain.declare_tool)",
                name,
            )

    def _plain(self, request: ToolCallRequest) -> ToolCallRequest:
        """The copy of the tool the framework runs: it keeps its raw result (``_raw.py``),
        and a tool made from a ``@guard.tool`` function, which its own wrapper would check a
        second time, runs the plain function instead (the check is here)."""
        tool = request.tool
        plain = None if tool is None else self.copies.get(tool, _unwrapped)
        return request if plain is None else request.override(tool=plain)


def _undeclarable(
    guard: tg.Guard, name: str, problem: str, call_id: str | None, traj: tg.Trajectory | None
) -> tg.Rejection:
    """A call of a tool whose schema the guard cannot compile: not run (fail closed), a
    step of cause ``schema``, and an answer that tells the model not to retry it."""
    return guard.record_rejection(
        name,
        f"{undeclarable(name, problem)}; refused",
        check="schema.undeclarable",
        model_message=(
            f"The tool `{name}` cannot be used: its argument schema is invalid, so its calls "
            f"cannot be checked ({problem}). The call did not run; do not call it again."
        ),
        call_id=call_id,
        trajectory=traj,
    )


def _refused(
    pending: tg.PendingCall, request: ToolCallRequest, raw: Cell, answer: Any = None
) -> bool:
    """Close ``pending`` as blocked where the framework refused the call and the tool never
    ran (its argument validation; a name the tool node has no tool of): the decision is
    what happened to the call, also in log mode, and the model keeps the framework's
    answer. False where the tool ran, or where it cannot be told (a tool with no running
    copy)."""
    name = request.tool_call["name"]
    if request.tool is None:
        failure = no_such_tool(name, answer, request.tool_call.get("id"))
    else:
        failure = refused_arguments(name, raw.refused, raw.ran)
    if failure is None:
        return False
    pending.reject(failure)
    return True


def _unwrapped(tool: BaseTool) -> BaseTool | None:
    update: dict[str, Any] = {}
    for attr in ("func", "coroutine"):
        fn = getattr(tool, attr, None)
        if fn is not None and _guarded(fn):
            update[attr] = fn.__wrapped__
    return capturing_copy(tool, update)


def _guarded(fn: Any) -> bool:
    return fn is not None and getattr(fn, "toolguard_tool", None) is not None


def _bubbled(
    pending: tg.PendingCall, exc: GraphBubbleUp, traj: tg.Trajectory | None, call_id: str | None
) -> None:
    """LangGraph's control flow passing through the tool, not a failure of it: an interrupt
    pauses the call (this attempt is cancelled; the call runs again from the start when the
    run resumes, and keeps its step), a command for the parent graph is the tool's answer."""
    if isinstance(exc, GraphInterrupt) or not exc.args:
        step = pending.cancel().step
        if traj is not None and call_id and step is not None:
            traj.reserve({call_id: step})
        return
    command = exc.args[0]
    pending.finish(command.update if isinstance(command, Command) else command, error=False)


_NOTHING = contextlib.nullcontext()


def active(
    guard: tg.Guard, traj: tg.Trajectory | None, traced: bool | None = None
) -> contextlib.AbstractContextManager[Any]:
    """Make ``traj`` current for the call when its spans record: tool nodes run calls in
    worker threads and tasks where the run's trajectory is not, and being current parents
    the call's span on the trajectory's span. (The checks get the trajectory explicitly.)
    Also where it is current but the current span records nothing: LangSmith's tracing makes
    a stand-in for its run current (ids derived from the run's, not those of the spans its
    OTel mode exports), and a call span below it would be in a trace of its own."""
    if traj is None or not (_traced(guard) if traced is None else traced):
        return _NOTHING
    if tg.current_trajectory() is traj and trace.get_current_span().is_recording():
        return _NOTHING
    return traj.activate()


def _traced(guard: tg.Guard) -> bool:
    """Whether the guard's calls make spans. Asked per call: a provider installed later is
    picked up, as the guard itself does. The guard's tracer follows the global provider
    unless it was given one; what that proxy delegates to is read as the guard reads it (no
    provider look-up: while none is installed, that reads an environment variable)."""
    tracer = guard.tracer
    if type(tracer) is trace.ProxyTracer:
        tracer = getattr(tracer, "_tracer", tracer)
    return not isinstance(tracer, trace.NoOpTracer)
