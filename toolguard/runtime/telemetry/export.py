"""The embedded default export: spans to an OTLP JSON Lines file, none dropped, never hanging.

``setup_file_export`` installs a :class:`SpanQueue` (backpressure instead of silent drops,
bounded waits, counted losses) in front of a line-safe file exporter, or in front of the
exporters ``OTEL_TRACES_EXPORTER`` names, resolved the way the OpenTelemetry SDK resolves them.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import sys
import threading
import time
import uuid
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.environment_variables import OTEL_TRACES_EXPORTER

from ..._extras import is_missing, missing_extra

# The SDK and the span file come with the [export] extra: imported when export is set up, so
# a guard installed without it imports (its spans are then no-ops).
if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider

    from .span_file import SpanFileExporter
    from .span_queue import SpanQueue

logger = logging.getLogger("toolguard")

DEFAULT_MAX_QUEUE_SIZE = 65_536  # about 200 MB of finished spans at the most
DEFAULT_SCHEDULE_DELAY_MS = 200
DEFAULT_MAX_EXPORT_BATCH = 2048
DEFAULT_FULL_WAIT_S = 10.0  # a producer waits this long for room before the exporter is stalled
DEFAULT_EXIT_TIMEOUT_S = 30.0  # TOOLGUARD_EXIT_TIMEOUT: the longest the whole exit waits
_CLOSE_MARGIN_S = 0.25  # of the exit's time, kept for shutting down after the flush

# What to install for the entry point an OTLP protocol needs (the SDK's error names neither).
_OTLP_PACKAGES = {
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
}

_configured: dict[str, SDKTracerProvider] = {}
# What the one exit hook closes, within one TOOLGUARD_EXIT_TIMEOUT: every queue set up, and
# the providers toolguard made (their own atexit shutdown is off: it would wait again).
_exit_queues: list[SpanQueue] = []
_exit_providers: list[SDKTracerProvider] = []
_exit_hook: list[bool] = []  # set once the hook is registered


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
    reported on standard error. That bound is the whole exit's: the flush and the shutdown of
    a provider made here (with every processor added to it) share it.

    Needs the ``[export]`` extra (``pip install 'toolguard-otel[export]'``): without it, an
    ImportError says so and nothing is set up.
    """
    try:
        from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider

        # The span file too, though OTEL_TRACES_EXPORTER may not need it: a missing extra is
        # reported before anything is installed, whatever the environment says.
        from .span_file import SpanFileExporter
        from .span_queue import SpanQueue
    except ImportError as exc:
        if not is_missing(exc, "export"):
            raise
        raise missing_extra("setup_file_export", "export", exc) from exc

    if not str(path).strip():
        raise ValueError("setup_file_export: the span file path is empty")
    key = os.path.abspath(path)
    if key in _configured:
        # A second set-up for the same file would add a second processor: every span twice.
        return _configured[key]
    current = trace.get_tracer_provider()
    made = not isinstance(current, TracerProvider)
    if isinstance(current, TracerProvider):
        provider = current
    else:
        # The SDK's resource: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and its detectors,
        # with an explicit service_name on top.
        resource = Resource.create({SERVICE_NAME: service_name} if service_name else {})
        if not resource.attributes.get(SERVICE_INSTANCE_ID):
            # SDKs before the service-instance detector (1.30 among them) set none, and runs
            # appended to one file must stay apart: one id per process, as newer SDKs give.
            resource = resource.merge(Resource({SERVICE_INSTANCE_ID: uuid.uuid4().hex}))
        # shutdown_on_exit=False: the SDK's hook would run after ours, unbounded by
        # TOOLGUARD_EXIT_TIMEOUT (30 s more on a stuck queue); ours shuts it down instead.
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        trace.set_tracer_provider(provider)
    queues = [
        SpanQueue(exporter, **_queue_settings()) for exporter in _exporters(path, SpanFileExporter)
    ]
    for queue in queues:
        provider.add_span_processor(queue)
    _exit_queues.extend(queues)
    if made:
        _exit_providers.append(provider)
    if not _exit_hook:
        # After the hook of a provider the user made, so it runs first (atexit is LIFO): that
        # provider's own shutdown then finds our queues closed and does not wait on them.
        atexit.register(_close_at_exit)
        _exit_hook.append(True)
    _configured[key] = provider
    return provider


def _exporters(path: str | os.PathLike[str], file_exporter: type[SpanFileExporter]) -> list[Any]:
    # Read here rather than with the SDK's _get_exporter_names: that one fails on "otlp,"
    # and on "none" beside another name; the spec's "none" means export nothing either way.
    names = [n.strip() for n in os.environ.get(OTEL_TRACES_EXPORTER, "").split(",")]
    names = [n for n in names if n]
    if "none" in names:  # the standard meaning: export nothing
        return []
    if not names:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return [file_exporter(path)]
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
    """The entry point ``name`` stands for: ``otlp`` resolved by OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
    or OTEL_EXPORTER_OTLP_PROTOCOL (gRPC when neither is set), as ``opentelemetry-instrument``
    resolves it: with the SDK's own function, so the two never disagree."""
    # Private to the SDK, but the one place its rules live (unchanged from 1.30 to 1.45).
    from opentelemetry.sdk._configuration import (
        _EXPORTER_BY_OTLP_PROTOCOL,
        _get_exporter_entry_point,
    )

    try:
        return str(_get_exporter_entry_point(name, "traces"))
    except RuntimeError as exc:  # an unsupported protocol: a configuration error, ours too
        supported = ", ".join(_EXPORTER_BY_OTLP_PROTOCOL)
        raise ValueError(f"OTEL_TRACES_EXPORTER={name!r}: {exc} (supported: {supported})") from None


def _queue_settings() -> dict[str, Any]:
    """The queue's sizes and delay from the SDK's OTEL_BSP_* variables, parsed here: the SDK
    parses them in BatchSpanProcessor's private helpers, which fall back to its own defaults
    (a 2048-span queue that drops silently, the very thing SpanQueue replaces) and reject a
    fractional delay. OTEL_BSP_EXPORT_TIMEOUT is not applied: export() takes no timeout, in the
    SDK's batch processor too; stuck exports are bounded by TOOLGUARD_EXIT_TIMEOUT instead."""
    from opentelemetry.sdk.environment_variables import (
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
        OTEL_BSP_MAX_QUEUE_SIZE,
        OTEL_BSP_SCHEDULE_DELAY,
    )

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
        "max_queue_size": int(number(OTEL_BSP_MAX_QUEUE_SIZE, DEFAULT_MAX_QUEUE_SIZE)),
        "max_export_batch_size": int(
            number(OTEL_BSP_MAX_EXPORT_BATCH_SIZE, DEFAULT_MAX_EXPORT_BATCH)
        ),
        "schedule_delay": number(OTEL_BSP_SCHEDULE_DELAY, DEFAULT_SCHEDULE_DELAY_MS) / 1000,
        "full_wait": number("TOOLGUARD_QUEUE_FULL_WAIT", DEFAULT_FULL_WAIT_S),
    }


def _exit_timeout() -> float:
    raw = os.environ.get("TOOLGUARD_EXIT_TIMEOUT", "")
    try:
        seconds = float(raw) if raw.strip() else DEFAULT_EXIT_TIMEOUT_S
    except ValueError:
        seconds = DEFAULT_EXIT_TIMEOUT_S
    return seconds if math.isfinite(seconds) and seconds >= 0 else DEFAULT_EXIT_TIMEOUT_S


def _close_at_exit() -> None:
    """Flush and close everything set up, waiting at most TOOLGUARD_EXIT_TIMEOUT in all.

    The work runs in a daemon thread: an exporter's or a processor's shutdown that hangs holds
    that thread, not the exit. When the time is up, what is still queued is counted and
    reported, and the process leaves without waiting."""
    seconds = _exit_timeout()
    ends = time.monotonic() + seconds
    # The flush stops a little before the end, leaving the exporters' and providers' own
    # shutdown that time (and the losses reported from the exit's thread, in order).
    flushed_by = ends - min(_CLOSE_MARGIN_S, seconds / 4)
    queues, providers = list(_exit_queues), list(_exit_providers)
    doing = ["closing the span queues (their flush, then their exporters' shutdown)"]

    def close() -> None:
        for queue in queues:
            try:
                left = flushed_by - time.monotonic()
                queue.shutdown(timeout_millis=max(0, int(left * 1000)))
            except Exception:
                logger.exception("toolguard: flushing spans at exit failed")
            queue.report_losses()
        doing[0] = "shutting the tracer provider down (its other span processors)"
        for provider in providers:
            try:
                provider.shutdown()
            except Exception:
                logger.exception("toolguard: shutting the tracer provider down at exit failed")

    worker = threading.Thread(target=close, name="toolguard-exit", daemon=True)
    try:
        worker.start()
    except RuntimeError:  # no new thread this late in the interpreter's exit: queues only
        providers.clear()
        close()
        return
    worker.join(max(0.0, ends - time.monotonic()))
    if not worker.is_alive():
        return
    for queue in queues:
        queue.abandon()
        queue.report_losses()
    print(
        f"toolguard: the exit did not finish within TOOLGUARD_EXIT_TIMEOUT ({seconds:g} s) "
        f"while {doing[0]}; the process exits without waiting for it.",
        file=sys.stderr,
    )
