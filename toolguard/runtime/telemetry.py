"""Spans, and the embedded default export.

Telemetry must never break a tool call: every call into OpenTelemetry from the guard's hot
path goes through a function here that logs and swallows what the SDK or an exporter raises.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

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

from .. import _contract as attr

logger = logging.getLogger("toolguard")

_SCOPE = "toolguard"
_VERSION = "0.1.0"
CONTENT_LIMIT = 4096  # characters kept of opt-in argument and result values


def get_tracer(provider: trace.TracerProvider | None = None) -> Tracer:
    # Without an explicit provider this is a ProxyTracer: it follows whatever global provider
    # the user sets later, so the guard never has to set (or override) one itself.
    return trace.get_tracer(_SCOPE, _VERSION, tracer_provider=provider)


def start_span(tracer: Tracer, name: str, parent: otel_context.Context | None = None) -> Span:
    try:
        return tracer.start_span(name, context=parent, kind=SpanKind.INTERNAL)
    except Exception:
        logger.exception("toolguard: could not start span %r; the call goes on untraced", name)
        return INVALID_SPAN


def start_call_span(tracer: Tracer, tool: str) -> Span:
    """The span of one call to ``tool``; INVALID_SPAN when ``tracer`` is a no-op one.

    A call makes its span current only while the span records, so what a no-op tracer would
    return (a non-recording wrapper of the current context's span) is never seen by anyone:
    skipping it saves a context look-up of five Python calls, about a tenth of a guarded call
    with tracing off (benchmarks/overhead.py). A trajectory's span, which is always made
    current, keeps going through `start_span`.
    """
    kind = type(tracer)
    if kind is ProxyTracer:
        # The default tracer follows the global provider: a no-op one until the user installs
        # an SDK. Asked on every call, so a provider installed later is picked up at once.
        try:
            kind = type(tracer._tracer)  # what ProxyTracer.start_span itself delegates to
        except Exception:
            kind = None
    if kind is NoOpTracer:
        return INVALID_SPAN
    return start_span(tracer, attr.call_span_name(tool))


def set_attributes(span: Span, attributes: Mapping[str, Any]) -> None:
    try:
        span.set_attributes(attributes)
    except Exception:
        logger.exception("toolguard: could not set span attributes")


def set_error(span: Span, description: str) -> None:
    try:
        span.set_status(Status(StatusCode.ERROR, description))
    except Exception:
        logger.exception("toolguard: could not set span status")


def end_span(span: Span) -> None:
    try:
        span.end()
    except Exception:  # a span processor or exporter that raises synchronously
        logger.exception("toolguard: ending a span failed; the tool call is unaffected")


def attach(span: Span) -> object | None:
    try:
        return otel_context.attach(trace.set_span_in_context(span))
    except Exception:
        logger.exception("toolguard: could not make the span current")
        return None


def detach(token: object | None) -> None:
    if token is None:
        return
    try:
        otel_context.detach(token)  # type: ignore[arg-type]
    except Exception:
        logger.exception("toolguard: could not restore the previous context")


def content(value: Any) -> str:
    """JSON text of an opt-in argument or result value, truncated."""
    try:
        text = json.dumps(value, default=_fallback, ensure_ascii=False)
    except Exception:
        text = repr(value)
    if len(text) > CONTENT_LIMIT:
        return text[:CONTENT_LIMIT] + "…"
    return text


def _fallback(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return repr(value)


def call_attributes(
    tool: str,
    trajectory_id: str | None,
    step: int | None,
    call_id: str | None,
    conversation_id: str | None,
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        attr.GEN_AI_OPERATION_NAME: attr.OPERATION_EXECUTE_TOOL,
        attr.GEN_AI_TOOL_NAME: tool,
        attr.GEN_AI_TOOL_TYPE: "function",
    }
    if trajectory_id is not None:
        attributes[attr.TRAJECTORY_ID] = trajectory_id
    if step is not None:
        attributes[attr.STEP] = step
    if call_id is not None:
        attributes[attr.GEN_AI_TOOL_CALL_ID] = call_id
    if conversation_id is not None:
        attributes[attr.GEN_AI_CONVERSATION_ID] = conversation_id
    return attributes


def verdict_attributes(decision: str, failures: Sequence[Any]) -> dict[str, Any]:
    if not failures:
        return {attr.VALID: True, attr.DECISION: decision}
    first = failures[0]
    return {
        attr.VALID: False,
        attr.DECISION: decision,
        attr.CAUSE: first.cause,
        attr.CHECK: first.check,
        attr.MESSAGE: first.message[:1024],
        attr.FAILED_CHECKS: [f.check for f in failures],
        attr.ERROR_TYPE: attr.error_type(first.cause),
    }


# -- the embedded default -------------------------------------------------------------------

# The SDK's BatchSpanProcessor drops spans once 2048 wait (measured in
# tests/test_export.py: a burst of 20,000 spans loses most of them). A deep queue keeps a
# tight loop of guarded calls lossless; memory stays bounded by the burst, and the deque
# grows on demand rather than being allocated up front.
DEFAULT_MAX_QUEUE_SIZE = 2_000_000
DEFAULT_SCHEDULE_DELAY_MS = 200
DEFAULT_MAX_EXPORT_BATCH = 2048
_configured: dict[str, trace.TracerProvider] = {}


def setup_file_export(
    path: str | os.PathLike[str] = "toolguard-spans.jsonl",
    *,
    service_name: str | None = None,
) -> trace.TracerProvider:
    """Send spans to an OTLP JSON Lines file (the official file exporter), losing none.

    Honours the standard environment: with ``OTEL_TRACES_EXPORTER`` set (``otlp``,
    ``console``, ``otlp_json_file``...) those exporters are used instead of the file, and
    ``OTEL_BSP_*`` / ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` apply. A tracer
    provider the user already installed is kept and given the processor; otherwise a new SDK
    provider becomes the global one. Everything queued is flushed at interpreter exit.
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if not str(path).strip():
        raise ValueError("setup_file_export: the span file path is empty")
    key = os.path.abspath(path)
    if key in _configured:
        # A second set-up for the same file would add a second processor: every span twice.
        return _configured[key]
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        resource = Resource.create({"service.name": service_name} if service_name else {})
        provider = TracerProvider(resource=resource)
        trace.set_tracer_provider(provider)
    for exporter in _exporters(path):
        processor = BatchSpanProcessor(exporter, **_batch_settings())
        provider.add_span_processor(processor)
    # Registered after the provider's own shutdown hook, so it runs first (atexit is LIFO):
    # an unbounded flush, where the SDK's shutdown would give up after 30 s.
    atexit.register(_flush, provider)
    _configured[key] = provider
    return provider


def _exporters(path: str | os.PathLike[str]) -> list[Any]:
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",")]
    names = [n for n in names if n and n != "none"]
    if not names:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter

        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return [FileSpanExporter(path)]
    from importlib.metadata import entry_points

    found = {ep.name: ep for ep in entry_points(group="opentelemetry_traces_exporter")}
    exporters = []
    for name in names:
        if name not in found:
            raise ValueError(
                f"OTEL_TRACES_EXPORTER names {name!r}, but no installed package provides it "
                f"(installed: {', '.join(sorted(found)) or 'none'})"
            )
        exporters.append(found[name].load()())
    return exporters


def _batch_settings() -> dict[str, int]:
    settings: dict[str, int] = {}
    if "OTEL_BSP_MAX_QUEUE_SIZE" not in os.environ:
        settings["max_queue_size"] = DEFAULT_MAX_QUEUE_SIZE
    if "OTEL_BSP_SCHEDULE_DELAY" not in os.environ:
        settings["schedule_delay_millis"] = DEFAULT_SCHEDULE_DELAY_MS
    if "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" not in os.environ:
        settings["max_export_batch_size"] = DEFAULT_MAX_EXPORT_BATCH
    return settings


def _flush(provider: Any) -> None:
    try:
        provider.force_flush()
    except Exception:
        logger.exception("toolguard: flushing spans at exit failed")
