"""The backend tests' OTLP exporter, each failed batch sent again: a loaded 2-core machine
made the exporter's default 10 s request timeout drop a batch (72 of 132 spans once). The
backends keep one row per span id, so a batch sent twice is no duplicate."""

from __future__ import annotations

import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

EXPORT_TIMEOUT_S = 60
FLUSH_TIMEOUT_MS = 600_000


class Retrying(SpanExporter):
    """``inner``, each batch tried again (up to ``attempts`` times) when it fails; the spans
    of a batch that failed every time are counted in ``dropped`` (the tests want 0)."""

    def __init__(self, inner: SpanExporter, attempts: int = 4) -> None:
        self.inner, self.attempts = inner, attempts
        self.retries = self.dropped = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for attempt in range(self.attempts):
            if self.inner.export(spans) is SpanExportResult.SUCCESS:
                return SpanExportResult.SUCCESS
            self.retries += 1
            time.sleep(min(2**attempt, 8))
        self.dropped += len(spans)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)
