"""The embedded default export: spans to an OTLP JSON Lines file, none dropped, never hanging.

``setup_file_export`` installs a :class:`SpanQueue` (backpressure instead of silent drops,
bounded waits, counted losses) in front of a line-safe file exporter, or in front of the
exporters ``OTEL_TRACES_EXPORTER`` names, resolved the way the OpenTelemetry SDK resolves them.
"""

from __future__ import annotations

import atexit
import logging
import os
import uuid
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from .span_file import SpanFileExporter
from .span_queue import SpanQueue

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider

logger = logging.getLogger("toolguard")

DEFAULT_MAX_QUEUE_SIZE = 65_536  # about 200 MB of finished spans at the most
DEFAULT_SCHEDULE_DELAY_MS = 200
DEFAULT_MAX_EXPORT_BATCH = 2048
DEFAULT_FULL_WAIT_S = 10.0  # a producer waits this long for room before the exporter is stalled
DEFAULT_EXIT_TIMEOUT_S = 30.0  # TOOLGUARD_EXIT_TIMEOUT: the longest the exit flush waits

# How the SDK picks an OTLP exporter (opentelemetry.sdk._configuration): `otlp` means gRPC
# unless OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL says otherwise.
_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}
_OTLP_PACKAGES = {
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
}

_configured: dict[str, SDKTracerProvider] = {}


def setup_file_export(
    path: str | os.PathLike[str] = "toolguard-spans.jsonl",
    *,
    service_name: str | None = None,
) -> SDKTracerProvider:
    """Send spans to an OTLP JSON Lines file, losing none while the disk and exporter work.

    Honours the standard environment: with ``OTEL_TRACES_EXPORTER`` set (``otlp``,
    ``console``, ``otlp_json_file``...) those exporters are used instead of the file, and
    ``OTEL_BSP_MAX_QUEUE_SIZE`` / ``OTEL_BSP_SCHEDULE_DELAY`` /
    ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` / ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``
    apply. A tracer provider the user already installed is kept and given the processor;
    otherwise a new SDK provider (with a ``service.instance.id`` per process, so runs appended
    to one file stay apart) becomes the global one. At exit the queue is flushed for at most
    ``TOOLGUARD_EXIT_TIMEOUT`` seconds (30); whatever could not be written is counted and
    reported on standard error.
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

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
        attributes: dict[str, str] = {"service.instance.id": uuid.uuid4().hex}
        if service_name:
            attributes["service.name"] = service_name
        provider = TracerProvider(resource=Resource.create(attributes))
        trace.set_tracer_provider(provider)
    queues = [SpanQueue(exporter, **_queue_settings()) for exporter in _exporters(path)]
    for queue in queues:
        provider.add_span_processor(queue)
    # Registered after the provider's own shutdown hook, so it runs first (atexit is LIFO).
    atexit.register(_flush_at_exit, queues)
    _configured[key] = provider
    return provider


def _exporters(path: str | os.PathLike[str]) -> list[Any]:
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",")]
    names = [n for n in names if n]
    if "none" in names:  # the standard meaning: export nothing
        return []
    if not names:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return [SpanFileExporter(path)]
    found = {ep.name: ep for ep in entry_points(group="opentelemetry_traces_exporter")}
    exporters = []
    for name in names:
        resolved = _entry_point_name(name)
        if resolved not in found:
            package = _OTLP_PACKAGES.get(resolved)
            hint = f" (pip install {package})" if package else ""
            via = f" (resolved to {resolved!r} by the OTLP protocol)" if resolved != name else ""
            raise ValueError(
                f"OTEL_TRACES_EXPORTER names {name!r}{via}, but no installed package provides "
                f"it{hint} (installed: {', '.join(sorted(found)) or 'none'})"
            )
        exporters.append(found[resolved].load()())
    return exporters


def _entry_point_name(name: str) -> str:
    if name != "otlp":
        return name
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL"
    )
    if not protocol:
        return _OTLP_BY_PROTOCOL["grpc"]
    if protocol.strip() not in _OTLP_BY_PROTOCOL:
        raise ValueError(
            f"unsupported OTLP protocol {protocol!r} (supported: {', '.join(_OTLP_BY_PROTOCOL)})"
        )
    return _OTLP_BY_PROTOCOL[protocol.strip()]


def _queue_settings() -> dict[str, Any]:
    def number(name: str, default: float) -> float:
        raw = os.environ.get(name)
        if raw is None or not raw.strip():
            return default
        try:
            value = float(raw)
        except ValueError:
            logger.warning("toolguard: %s=%r is not a number; using %s", name, raw, default)
            return default
        return value if value > 0 else default

    return {
        "max_queue_size": int(number("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE_SIZE)),
        "max_export_batch_size": int(
            number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_MAX_EXPORT_BATCH)
        ),
        "schedule_delay": number("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_SCHEDULE_DELAY_MS) / 1000,
        "full_wait": number("TOOLGUARD_QUEUE_FULL_WAIT", DEFAULT_FULL_WAIT_S),
    }


def _flush_at_exit(queues: list[SpanQueue]) -> None:
    timeout = os.environ.get("TOOLGUARD_EXIT_TIMEOUT", "")
    try:
        seconds = float(timeout) if timeout.strip() else DEFAULT_EXIT_TIMEOUT_S
    except ValueError:
        seconds = DEFAULT_EXIT_TIMEOUT_S
    for queue in queues:
        try:
            queue.shutdown(timeout_millis=int(seconds * 1000))
            queue.report_losses()
        except Exception:
            logger.exception("toolguard: flushing spans at exit failed")
