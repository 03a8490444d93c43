"""The embedded default export: spans to an OTLP JSON Lines file, none dropped."""

from __future__ import annotations

import atexit
import logging
import os
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider

logger = logging.getLogger("toolguard")

# The SDK's BatchSpanProcessor drops spans once 2048 wait (measured in
# tests/test_export.py: a burst of 20,000 spans loses most of them). A deep queue keeps a
# tight loop of guarded calls lossless; memory stays bounded by the burst, and the deque
# grows on demand rather than being allocated up front.
DEFAULT_MAX_QUEUE_SIZE = 2_000_000
DEFAULT_SCHEDULE_DELAY_MS = 200
DEFAULT_MAX_EXPORT_BATCH = 2048
_configured: dict[str, SDKTracerProvider] = {}


def setup_file_export(
    path: str | os.PathLike[str] = "toolguard-spans.jsonl",
    *,
    service_name: str | None = None,
) -> SDKTracerProvider:
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
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        provider = current
    else:
        resource = Resource.create({"service.name": service_name} if service_name else {})
        provider = TracerProvider(resource=resource)
        trace.set_tracer_provider(provider)
    for exporter in _exporters(path):
        # None lets the SDK read the OTEL_BSP_* variable the user set.
        env = os.environ
        processor = BatchSpanProcessor(
            exporter,
            max_queue_size=None
            if "OTEL_BSP_MAX_QUEUE_SIZE" in env
            else DEFAULT_MAX_QUEUE_SIZE,
            schedule_delay_millis=None
            if "OTEL_BSP_SCHEDULE_DELAY" in env
            else DEFAULT_SCHEDULE_DELAY_MS,
            max_export_batch_size=None
            if "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" in env
            else DEFAULT_MAX_EXPORT_BATCH,
        )
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


def _flush(provider: Any) -> None:
    try:
        provider.force_flush()
    except Exception:
        logger.exception("toolguard: flushing spans at exit failed")
