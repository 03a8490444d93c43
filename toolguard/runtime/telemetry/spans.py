"""Spans, and the embedded default export.

Telemetry must never break a tool call: every call into OpenTelemetry from the guard's hot
path goes through a function here that logs and swallows what the SDK or an exporter raises
(:func:`log_failure`: once per kind of failure, not once per call).
"""

from __future__ import annotations

import json
import logging
import reprlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    INVALID_SPAN,
    NoOpTracer,
    ProxyTracer,
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
)

from ... import _contract as contract
from ..._adapter import distribution_version
from ..verdict import shorten_text

logger = logging.getLogger("toolguard")

_SCOPE = "toolguard"
_VERSION = distribution_version("toolguard-otel")  # the tracer's scope version
CONTENT_LIMIT = 4096  # characters kept of opt-in argument and result values
NAME_LIMIT = 256  # characters of a tool name in a span (a model may send a 10 MB one)


# What log_failure has logged: (message, exception type). Process-wide, as a broken
# exporter or provider is: a guard made per request must not log it again each time.
_logged: set[tuple[str, type[BaseException] | None]] = set()


def log_failure(message: str, *args: object) -> None:
    """Log the telemetry failure being handled (call it in an ``except`` block): at ERROR,
    with its traceback and the exception's type, the first time this ``message`` meets
    that type; at DEBUG after that, so a broken exporter does not write a traceback on
    every call. The exception in hand when telemetry failed (a tool's, a rejection's) is
    left out of the traceback: its text may hold argument values."""
    exc = sys.exc_info()[1]
    key = (message, None if exc is None else type(exc))
    if key in _logged:
        logger.debug(message + " (again: %s)", *args, type(exc).__name__)
        return
    _logged.add(key)
    if exc is not None:
        exc.__suppress_context__ = True  # swallowed here: nobody else reads it
    logger.error(
        message + " (%s; logged once, repeats at DEBUG level)",
        *args,
        type(exc).__name__,
        exc_info=exc is not None,
    )


def get_tracer(provider: trace.TracerProvider | None = None) -> Tracer:
    # Without an explicit provider this is a ProxyTracer: it follows whatever global provider
    # the user sets later, so the guard never has to set (or override) one itself.
    try:
        return trace.get_tracer(_SCOPE, _VERSION, tracer_provider=provider)
    except Exception:  # a provider that cannot make a tracer: the guard runs untraced
        log_failure("toolguard: the tracer provider could not make a tracer; calls go untraced")
        return NoOpTracer()


def is_recording(span: Span) -> bool:
    """``span.is_recording()``, False when it raises (off the hot path; the call's start
    asks it inline)."""
    try:
        return span is not INVALID_SPAN and span.is_recording()
    except Exception:
        log_failure(NOT_ASKED)
        return False


NOT_ASKED = "toolguard: a span could not tell whether it records; it is left untraced"


def start_span(
    tracer: Tracer,
    name: str,
    parent: otel_context.Context | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Span:
    try:
        return tracer.start_span(
            name, context=parent, kind=SpanKind.INTERNAL, attributes=attributes
        )
    except Exception:
        log_failure("toolguard: could not start span %r; the call goes on untraced", name)
        return INVALID_SPAN


# start_call_span's answer when the current span is the framework's own span for this call.
REUSED: Final = INVALID_SPAN.__class__(INVALID_SPAN.get_span_context())


def is_noop(tracer: Tracer) -> bool:
    """Whether ``tracer`` makes no spans (a no-op tracer, or the default one while no SDK is
    installed); asked on every call, so a provider installed later is picked up at once."""
    kind: type[object] = type(tracer)
    if kind is ProxyTracer:
        kind = type(getattr(tracer, "_tracer", None))
    return kind is NoOpTracer


def makes_spans(tracer: Tracer) -> bool | None:
    """Whether ``tracer`` makes spans, where that is fixed for good: False for a no-op
    tracer, True for any other but the API's proxy; None for the proxy, whose provider may
    be set later (ask :func:`is_noop` on every call). A guard decides it once, so a call
    with an explicit provider does not ask its tracer's type each time."""
    kind = type(tracer)
    if kind is ProxyTracer:
        return None
    return kind is not NoOpTracer


def call_span_names(tool: str) -> tuple[str, str]:
    """A tool's name as its spans show it (shortened: a model may send a 10 MB one) and its
    call span's name; a declared tool's are computed once (``Tool.span_names``)."""
    label = shorten_text(tool, NAME_LIMIT)
    return label, contract.call_span_name(label)


def start_call_span(
    tracer: Tracer,
    tool: str,
    span_name: str,
    reuse_framework_span: bool = False,
    attributes: Mapping[str, Any] | None = None,
    not_a_call: Span | None = None,
    not_a_call_context: otel_context.Context | None = None,
) -> Span:
    """The span of one call to ``tool`` (named ``span_name``, :func:`call_span_names`) on a
    tracer that makes spans (the caller asked :func:`is_noop`), or :data:`REUSED` when
    ``reuse_framework_span`` and the current span is already the framework's
    ``execute_tool {tool}`` span (PROTOCOL 1.1: one span per call).
    ``attributes`` (the call's, ``call_attributes``) are given to the span as it starts: the
    SDK cleans them once, instead of again under the span's lock when set on it afterwards
    (about 10 us a call with the SDK, benchmarks/README.md). ``not_a_call``: a span known
    not to be one (the trajectory's summary span), not inspected; ``not_a_call_context``:
    the context that made it current (``with trajectory``): while that very context is the
    current one, its span is ``not_a_call`` by construction, and is not looked up again.

    A call makes its span current only while the span records, so what a no-op tracer would
    return (a non-recording wrapper of the current context's span) is never seen by anyone:
    the caller skips it, which saves a context look-up of five Python calls, about a tenth
    of a guarded call with tracing off (benchmarks/overhead.py). A trajectory's span, which
    is always made current, keeps going through `start_span`.
    """
    parent = None
    if reuse_framework_span:
        # One look-up of the current context: for the framework's span and as the parent.
        try:
            parent = otel_context.get_current()
            if parent is not_a_call_context and not_a_call is not None:
                current = not_a_call
            else:
                current = trace.get_current_span(parent)
            # The trajectory's own span (current inside `with traj`) is never a call's.
            if (
                current is not not_a_call
                and current.is_recording()
                and _is_call_span(current, tool, span_name)
            ):
                return REUSED
        except Exception:  # parent kept if read: the span that failed was only a candidate
            log_failure("toolguard: could not read the current span")
    try:  # start_span, inline (telemetry never breaks a call)
        return tracer.start_span(
            span_name, context=parent, kind=SpanKind.INTERNAL, attributes=attributes
        )
    except Exception:
        log_failure("toolguard: could not start span %r; the call goes on untraced", span_name)
        return INVALID_SPAN


def _is_call_span(span: Span, tool: str, name: str) -> bool:
    """The framework's own span for this call: named ``execute_tool {tool}``, or carrying the
    GenAI attributes of one under another name (the MCP SDK's ``tools/call {tool}``)."""
    if getattr(span, "name", None) == name:
        return True
    attributes = getattr(span, "attributes", None) or {}
    return bool(
        attributes.get(contract.GEN_AI_OPERATION_NAME) == contract.OPERATION_EXECUTE_TOOL
        and attributes.get(contract.GEN_AI_TOOL_NAME) == tool
    )


def current_span() -> Span:
    try:
        return trace.get_current_span()
    except Exception:
        log_failure("toolguard: could not read the current span")
        return INVALID_SPAN


def set_attributes(span: Span, attributes: Mapping[str, Any]) -> None:
    try:
        span.set_attributes(attributes)
    except Exception:
        log_failure("toolguard: could not set span attributes")


def set_error(span: Span, description: str) -> None:
    try:
        span.set_status(Status(StatusCode.ERROR, description))
    except Exception:
        log_failure("toolguard: could not set span status")


def end_span(span: Span) -> None:
    try:
        span.end()
    except Exception:  # a span processor or exporter that raises synchronously
        log_failure("toolguard: ending a span failed; the tool call is unaffected")


def attach(span: Span) -> object | None:
    try:
        return otel_context.attach(trace.set_span_in_context(span))
    except Exception:
        log_failure("toolguard: could not make the span current")
        return None


def attach_recording(span: Span) -> object | None:
    """:func:`attach` for a span that records; None (nothing to detach) for one that does not."""
    return attach(span) if is_recording(span) else None


def attach_context(span: Span) -> tuple[object | None, otel_context.Context | None]:
    """:func:`attach`, with the context it made current (a trajectory keeps it: see
    ``start_call_span``'s ``not_a_call_context``)."""
    try:
        context = trace.set_span_in_context(span)
        return otel_context.attach(context), context
    except Exception:
        log_failure("toolguard: could not make the span current")
        return None, None


def detach(token: object | None) -> None:
    if token is None:
        return
    try:
        otel_context.detach(token)  # type: ignore[arg-type]
    except Exception:
        log_failure("toolguard: could not restore the previous context")


def content(value: Any) -> str:
    """JSON text of an opt-in argument or result value, truncated. Never raises: a value nested
    too deep, or whose repr raises, is described by its type."""
    try:
        text = json.dumps(value, default=_fallback, ensure_ascii=False)
    except Exception:  # RecursionError included: too deep, or not serialisable
        try:
            text = reprlib.repr(value)
        except Exception:
            text = f"<unrepresentable {type(value).__name__}>"
    if len(text) > CONTENT_LIMIT:
        return text[:CONTENT_LIMIT] + "…"
    return text


def _fallback(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return repr(value)


def call_attributes(
    label: str,
    trajectory_id: str | None,
    step: int | None,
    call_id: str | None,
    conversation_id: str | None,
) -> dict[str, Any]:
    """A call span's attributes as it starts; ``label``: the tool's name already shortened
    (:func:`call_span_names`). Built on every traced call: the keys are this module's
    globals, not looked up on the contract module each time."""
    attributes: dict[str, Any] = {
        _OPERATION_NAME: _EXECUTE_TOOL,
        _TOOL_NAME: label,
        _TOOL_TYPE: "function",
    }
    if trajectory_id is not None:
        attributes[_TRAJECTORY_ID] = trajectory_id
    if step is not None:
        attributes[_STEP] = step
    if call_id is not None:
        attributes[_CALL_ID] = call_id[:NAME_LIMIT]
    if conversation_id is not None:
        attributes[_CONVERSATION_ID] = conversation_id
    return attributes


_OPERATION_NAME = contract.GEN_AI_OPERATION_NAME
_EXECUTE_TOOL = contract.OPERATION_EXECUTE_TOOL
_TOOL_NAME = contract.GEN_AI_TOOL_NAME
_TOOL_TYPE = contract.GEN_AI_TOOL_TYPE
_TRAJECTORY_ID = contract.TRAJECTORY_ID
_STEP = contract.STEP
_CALL_ID = contract.GEN_AI_TOOL_CALL_ID
_CONVERSATION_ID = contract.GEN_AI_CONVERSATION_ID


def verdict_attributes(
    decision: str, failures: Sequence[Any], record_content: bool = False
) -> dict[str, Any]:
    if not failures:
        return {contract.VALID: True, contract.DECISION: decision}
    first = failures[0]
    # Argument and result values reach telemetry only when the user opted in.
    message = first.message if record_content else first.telemetry_message
    return {
        contract.VALID: False,
        contract.DECISION: decision,
        contract.CAUSE: first.cause,
        contract.CHECK: first.check,
        contract.MESSAGE: message[:1024],
        contract.FAILED_CHECKS: [f.check for f in failures],
        contract.ERROR_TYPE: contract.error_type(first.cause),
    }
