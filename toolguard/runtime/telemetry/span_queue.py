"""A batching span processor that loses nothing while its exporter works and never hangs.

The SDK's ``BatchSpanProcessor`` drops spans silently once its queue is full, and its exit
flush waits on the exporter without limit (a hung ``export()`` keeps the process alive). This
one keeps the SDK's batching but changes what happens at the edges:

- a full queue makes the producer wait for room (backpressure), up to ``full_wait`` seconds;
  if the exporter made no progress in that time it is *stalled*: further spans are dropped
  at once, and counted, until an export succeeds again;
- a span ended after shutdown is counted, not silently ignored;
- ``force_flush`` and ``shutdown`` wait at most their timeout, and never call into an exporter
  that is stuck in ``export()``;
- everything lost is counted (``lost``) and reported once on standard error at exit.
"""

from __future__ import annotations

import collections
import logging
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .spans import log_failure

logger = logging.getLogger("toolguard")


class SpanQueue(SpanProcessor):
    def __init__(
        self,
        exporter: SpanExporter,
        *,
        max_queue_size: int = 65_536,
        max_export_batch_size: int = 2048,
        schedule_delay: float = 0.2,
        full_wait: float = 10.0,
    ) -> None:
        if max_queue_size < 1 or max_export_batch_size < 1:
            raise ValueError("max_queue_size and max_export_batch_size must be positive")
        self.exporter = exporter
        self.max_queue_size = max_queue_size
        self.max_export_batch_size = min(max_export_batch_size, max_queue_size)
        self.schedule_delay = schedule_delay
        self.full_wait = full_wait
        self.lost = 0  # spans that will never reach the exporter, or that it refused
        self.lost_reasons: collections.Counter[str] = collections.Counter()
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._cond = threading.Condition()
        self._exporting = 0  # spans handed to export() and not back yet
        self._stalled = False
        self._shutdown = False
        self._warned: set[str] = set()
        self._worker = threading.Thread(target=self._run, name="toolguard-spans", daemon=True)
        self._worker.start()

    # -- producer side -----------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context or not span.context.trace_flags.sampled:
            return
        with self._cond:
            if self._shutdown:
                self._lose(1, "ended after the tracer provider was shut down")
                return
            if len(self._queue) >= self.max_queue_size and (
                self._stalled or not self._wait_for_room()
            ):
                self._lose(1, "the exporter is stalled and the queue is full")
                return
            self._queue.append(span)
            if len(self._queue) >= self.max_export_batch_size:
                self._cond.notify_all()

    def _wait_for_room(self) -> bool:
        deadline = time.monotonic() + self.full_wait
        self._cond.notify_all()
        while len(self._queue) >= self.max_queue_size:
            left = deadline - time.monotonic()
            if left <= 0 or self._shutdown:
                self._stalled = True
                return False
            self._cond.wait(left)
        return True

    def _lose(self, count: int, reason: str) -> None:
        self.lost += count
        self.lost_reasons[reason] += count
        if reason not in self._warned:
            self._warned.add(reason)
            logger.warning("toolguard: spans are lost: %s (counted, reported at exit)", reason)

    # -- worker ------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    if self._shutdown:
                        return
                    self._cond.wait(self.schedule_delay)
                    if not self._queue:
                        continue
                elif len(self._queue) < self.max_export_batch_size and not self._shutdown:
                    self._cond.wait(self.schedule_delay)
                n = min(len(self._queue), self.max_export_batch_size)
                batch = [self._queue.popleft() for _ in range(n)]
                self._exporting = n
            ok = self._export(batch)
            with self._cond:
                self._exporting = 0
                if ok:
                    self._stalled = False
                else:
                    self._lose(len(batch), "the exporter failed")
                self._cond.notify_all()

    def _export(self, batch: Sequence[ReadableSpan]) -> bool:
        try:
            return self.exporter.export(batch) is SpanExportResult.SUCCESS
        except Exception:  # the batch is counted as lost; the cause said once, not per batch
            log_failure("toolguard: the span exporter raised")
            return False

    # -- flush and shutdown ------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until every queued span was handed to the exporter and came back, at most
        ``timeout_millis``; False when time ran out (the exporter is slow or stuck)."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cond:
            self._cond.notify_all()
            while self._queue or self._exporting:
                left = deadline - time.monotonic()
                if left <= 0 or not self._worker.is_alive():
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        with self._cond:
            if self._shutdown:
                # A second shutdown (the provider's, after the exit hook's) would wait its whole
                # timeout again on an export still stuck: what it could write is counted already.
                return
        flushed = self.force_flush(timeout_millis)
        with self._cond:
            if self._shutdown:
                return
            self._shutdown = True
            stuck = self._queue or self._exporting
            if stuck:
                self._lose(len(self._queue) + self._exporting, "not written before exit")
                self._queue.clear()
            self._cond.notify_all()
        if flushed and not stuck:
            # Only an idle exporter is shut down: one stuck in export() may hold the lock its
            # own shutdown() needs, and waiting on it is what kept processes from exiting.
            try:
                self.exporter.shutdown()
            except Exception:
                logger.exception("toolguard: shutting the span exporter down failed")

    def abandon(self) -> None:
        """Shut down at once, never calling the exporter: what is still queued or in
        ``export()`` is counted as not written (the exit's time is up)."""
        with self._cond:
            if self._shutdown:
                return
            self._shutdown = True
            if self._queue or self._exporting:
                self._lose(len(self._queue) + self._exporting, "not written before exit")
                self._queue.clear()
            self._cond.notify_all()

    def report_losses(self, stream: Any = None) -> None:
        """Say on standard error what was lost, once (called at exit, from the exit's thread
        or, when its time is up, from the exiting one: each loss is said once)."""
        with self._cond:
            lost, reasons = self.lost, sorted(self.lost_reasons.items())
            self.lost_reasons.clear()
            self.lost = 0
        if not lost:
            return
        why = "; ".join(f"{n} {reason}" for reason, n in reasons)
        print(
            f"toolguard: {lost} span(s) were not written ({why}). The report flags "
            "the trajectories they belonged to as incomplete or short of call spans.",
            file=stream or sys.stderr,
        )
