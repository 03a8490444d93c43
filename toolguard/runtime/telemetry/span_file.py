"""The span file: OTLP JSON Lines, one export request per line, that stays line-aligned.

The official file exporter writes through a buffered text stream: when a write fails half
way (the disk is full), the half-written batch stays in the buffer and is glued to the next
one, and the report stops at that line. Here each batch is one ``os.write`` of one complete
line; a failed write is cut back off the file (or, where the file cannot be truncated, the
next line starts on a fresh line), and the batch counts as lost.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .otlp_json import encode_request, request_line

logger = logging.getLogger("toolguard")


class SpanFileExporter(SpanExporter):
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self._partial = False  # a failed write may have left half a line behind
        self._closed = False
        self._failing: str | None = None  # why writes fail, since the last that worked

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        request = encode_request(spans)
        if not request:
            return SpanExportResult.SUCCESS
        line = request_line(request)
        with self._lock:
            if self._closed or not self._still_linked():
                return SpanExportResult.FAILURE
            if self._partial:
                line = b"\n" + line
            return self._write(line)

    def _still_linked(self) -> bool:
        """Whether the open file is still the one at ``path``: a file (or folder) removed
        under a running process takes every later write with it, unseen. Opened again where
        the path can be made anew; else the batch is lost, and counted."""
        try:
            if os.fstat(self._fd).st_nlink > 0:
                return True
        except OSError:
            return True  # nothing to tell: the write says what is wrong
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            logger.warning(
                "toolguard: the span file %s was removed and cannot be made again (%s); "
                "spans are lost and counted until it can",
                self.path,
                exc.strerror or type(exc).__name__,
            )
            return False
        os.close(self._fd)
        self._fd, self._partial = fd, False
        logger.warning("toolguard: the span file %s was removed; writing a new one", self.path)
        return True

    def _write(self, line: bytes) -> SpanExportResult:
        try:
            start: int | None = os.lseek(self._fd, 0, os.SEEK_END)
        except OSError:
            start = None
        view = memoryview(line)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            if len(view) < len(line):
                self._partial = not _truncate(self._fd, start)
            reason = exc.strerror or type(exc).__name__
            # Once per outage (a full disk fails every batch): the loss is counted and
            # reported at exit; a write that works again ends the outage.
            log = logger.debug if reason == self._failing else logger.warning
            self._failing = reason
            log(
                "toolguard: writing %d spans to %s failed (%s); they are lost and counted"
                " (said once until a write succeeds)",
                line.count(b'"spanId"'),
                self.path,
                reason,
            )
            return SpanExportResult.FAILURE
        self._partial = False
        if self._failing is not None:
            self._failing = None
            logger.warning("toolguard: writing spans to %s works again", self.path)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self._fd)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True  # every export is written through at once


def _truncate(fd: int, size: int | None) -> bool:
    if size is None:
        return False
    try:
        os.ftruncate(fd, size)
    except OSError:
        return False
    return True
