"""One span per call, the instrumentation's own where one traces the tool: :class:`CallSpan`.

LangChain's instrumentations (Traceloop's, OpenInference's) open a tool span from the tool's
``on_tool_start`` callback, inside the tool node's handler: after the guard has checked the
call, so at check time there is nothing to write onto. The guard's span is therefore decided
when the tool runs. The check writes into a ``CallSpan`` (``guard.check(span=...)``), which
keeps what it is given; in the tool's ``_run`` (the running copy, ``_raw.py``) the
instrumentation's span of this run is looked up (``_instrumentation.tool_span``) and takes
the attributes, or else the guard opens its own span there, started at the check and current
while the tool runs, as before. The verdict needs the tool's answer, which LangChain makes
after ``on_tool_end`` has ended the instrumentation's span: so that span's ``end`` is held
until the call is closed, then done with the end time it was asked for. A call that never
reaches the tool (blocked; refused by LangChain's own argument validation) gets the guard's
own span, from the check to its close.

Telemetry never breaks a call: whatever the SDK raises here is logged and dropped.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN_CONTEXT, Span, SpanContext, SpanKind, Status
from opentelemetry.util import types

from . import _instrumentation

logger = logging.getLogger("toolguard")

# The instrumentations' spans calls were bound to: never taken for another call's (a tool of
# the same name run inside this one's tool sees this span current). The guard's own spans
# are never taken (``_instrumentation.tool_span`` passes over its scope's).
_bound: weakref.WeakSet[Span] = weakref.WeakSet()


class CallSpan(Span):
    """The span of one call while it is not yet known whose it is; then a stand-in for it."""

    def __init__(self, tracer: trace.Tracer, tool: str, *, adopt: bool) -> None:
        self._tracer = tracer
        self._tool = tool
        self._adopt = adopt  # the guard's reuse_framework_spans
        self._parent = otel_context.get_current()  # as the guard's own span would have it
        self._start = time.time_ns()
        self._attributes: dict[str, Any] = {}
        self._status: tuple[Status | Any, str | None] | None = None
        self._target: Span | None = None
        self._own = False
        self._lock: threading.Lock | None = None  # made when an instrumentation's end is held
        self._closed = False
        self._held_end: int | None = None  # the instrumentation's end time, while held

    # -- what the guard writes: kept until the span is bound, then passed on --------------
    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        if self._target is None:
            self._attributes.update(attributes)
        else:
            _safely(self._target.set_attributes, attributes)

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        self.set_attributes({key: value})

    def set_status(self, status: Status | Any, description: str | None = None) -> None:
        if self._target is None:
            self._status = (status, description)
        else:
            _safely(self._target.set_status, status, description)

    def is_recording(self) -> bool:
        return True  # made only while the guard's spans record

    def get_span_context(self) -> SpanContext:
        return INVALID_SPAN_CONTEXT if self._target is None else self._target.get_span_context()

    def add_event(
        self,
        name: str,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
    ) -> None:
        if self._target is not None:
            _safely(self._target.add_event, name, attributes, timestamp)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        if self._target is not None:
            _safely(self._target.record_exception, exception, attributes, timestamp, escaped)

    def update_name(self, name: str) -> None:
        pass  # the name is the instrumentation's, or the guard's execute_tool {tool}

    def end(self, end_time: int | None = None) -> None:
        self.close()

    # -- while the tool runs (the running copy's _run / _arun) ----------------------------
    def enter(self) -> object | None:
        """Bind the span (the instrumentation's for this run, else the guard's own) and make
        it current while the tool runs. Returns the token for :meth:`leave`."""
        try:
            return self._enter()
        except Exception:  # telemetry trouble never breaks the call
            logger.exception("toolguard: could not bind the call's span")
            return None

    def _enter(self) -> object | None:
        if self._target is None and not self._closed:
            theirs = _instrumentation.tool_span(self._tool) if self._adopt else None
            if theirs is not None and _sdk_span(theirs) not in _bound and self._hold(theirs):
                self._bind(theirs)
            else:
                self._open()
        target = self._target
        if target is None or trace.get_current_span() is target:
            return None
        try:
            return otel_context.attach(trace.set_span_in_context(target))
        except Exception:
            logger.exception("toolguard: could not make the call's span current")
            return None

    def leave(self, token: object | None) -> None:
        if token is not None:
            try:
                otel_context.detach(token)  # type: ignore[arg-type]
            except Exception:
                logger.exception("toolguard: could not restore the previous context")

    # -- the call closed: end our span, or let theirs end -----------------------------------
    def close(self) -> None:
        """After the guard has closed the call (its verdict written): end the guard's span,
        or end the instrumentation's where it asked to end already. Idempotent."""
        try:
            self._close()
        except Exception:  # telemetry trouble never breaks the call
            logger.exception("toolguard: could not end the call's span")

    def _close(self) -> None:
        if self._closed:
            return
        if self._target is None:
            self._open()
        target = self._target
        if target is None or self._own:
            self._closed = True
            if target is not None:
                _safely(target.end)
            return
        inner = _sdk_span(target)
        assert self._lock is not None  # made by _hold
        with self._lock:
            self._closed = True
            held = self._held_end
            try:
                object.__delattr__(inner, "end")  # its own end method again
            except Exception:
                logger.debug("toolguard: could not restore the span's end", exc_info=True)
        if held is not None:
            _safely(inner.end, held)

    def _hold(self, span: Span) -> bool:
        """Hold ``span``'s end until :meth:`close` (its verdict is written then). Held on the
        SDK's span itself, inside a wrapper such as OpenInference's (whose own ``end``
        writes its last attributes, then ends the span it wraps)."""
        inner = _sdk_span(span)
        real_end = inner.end
        lock = self._lock = threading.Lock()

        def end(end_time: int | None = None) -> None:
            with lock:
                if not self._closed:
                    if self._held_end is None:
                        self._held_end = end_time if end_time is not None else time.time_ns()
                    return
            real_end(end_time)

        try:
            object.__setattr__(inner, "end", end)
        except Exception:  # a span type that refuses it: the guard's own span instead
            return False
        return True

    def _bind(self, span: Span) -> None:
        self._target = span
        _bound.add(_sdk_span(span))
        _safely(span.set_attributes, self._attributes)
        if self._status is not None:
            _safely(span.set_status, *self._status)

    def _open(self) -> None:
        try:
            span = self._tracer.start_span(
                f"execute_tool {self._tool}",
                context=self._parent,
                kind=SpanKind.INTERNAL,
                attributes=self._attributes,
                start_time=self._start,
            )
        except Exception:
            logger.exception("toolguard: could not start the call's span; it goes untraced")
            return
        self._target = span
        self._own = True
        if self._status is not None:
            _safely(span.set_status, *self._status)


def _sdk_span(span: Any) -> Any:
    """The span inside an instrumentation's proxy of it (wrapt's ``__wrapped__``)."""
    for _ in range(8):
        inner = getattr(span, "__wrapped__", None)
        if inner is None:
            return span
        span = inner
    return span


def _safely(method: Callable[..., Any], *args: Any) -> None:
    try:
        method(*args)
    except Exception:
        logger.exception("toolguard: a span refused an update; the tool call is unaffected")
