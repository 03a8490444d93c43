"""A telemetry failure is logged once (not once per call or batch), naming what failed,
and with no argument value in the log, the SDK's own included."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from telemetry_fakes import FAULTS, REFERENCE, SECRET, BrokenProvider, RaisingExporter, session

import toolguard as tg


@pytest.mark.parametrize("broken", FAULTS, ids=["+".join(f) for f in FAULTS])
def test_a_telemetry_failure_is_logged_once_naming_what_failed(broken, caplog) -> None:
    provider = BrokenProvider(*broken)
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        for _ in range(3):
            session(provider)
    logged = [r for r in caplog.records if r.name == "toolguard" and r.levelno >= logging.WARNING]
    messages = [r.getMessage() for r in logged]
    if broken != ("get_span_context",):  # never asked by the guard itself
        assert logged, "a broken tracer went unlogged"
    assert len(messages) == len(set(messages)), messages  # each failure once, not per call
    assert len(logged) <= 10, messages
    for record in logged:
        assert record.exc_info is not None and "is broken" in str(record.exc_info[1])


def test_no_argument_value_in_a_log_of_a_failed_export(caplog) -> None:
    """A span ended while a rejection is being handled: the exporter's traceback, logged by
    the SDK, chains the exception in hand, whose text must hold no argument value."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(RaisingExporter()))
    guard = tg.Guard(tracer_provider=provider)

    @guard.tool
    def count(n: int) -> int:
        return n

    with caplog.at_level(logging.DEBUG), guard.trajectory("t"):
        assert guard.call("count", {"n": SECRET}).cause == "schema"
        assert guard.call("count", '{"n": "' + SECRET + '"').cause == "schema"  # not JSON
        with pytest.raises(tg.ToolCallRejected):
            count(SECRET)  # type: ignore[arg-type]
    assert caplog.records  # the export failures were logged
    assert SECRET not in caplog.text
    provider.shutdown()


def test_no_argument_value_in_a_log_of_a_failed_export_after_a_tool_raised(caplog) -> None:
    """The tool's exception (whose text may hold argument values) is in hand as its span
    ends: an exporter failing then must not log it along with its own."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(RaisingExporter()))
    guard = tg.Guard(tracer_provider=provider)

    @guard.tool
    def lookup(key: str) -> str:
        raise KeyError(f"no record {key}")

    @guard.tool
    async def alookup(key: str) -> str:
        raise KeyError(f"no record {key}")

    with caplog.at_level(logging.DEBUG), guard.trajectory("t"):
        assert guard.call("lookup", {"key": SECRET}).cause == "state_consistency"
        with pytest.raises(KeyError):
            lookup(SECRET)
        assert asyncio.run(guard.acall("alookup", {"key": SECRET})).cause == "state_consistency"
        with pytest.raises(KeyError):
            asyncio.run(alookup(SECRET))
        pending = guard.check("lookup", {"key": SECRET})
        pending.fail(KeyError(f"no record {SECRET}"))
    assert caplog.records  # the export failures were logged
    assert SECRET not in caplog.text
    provider.shutdown()


class FailingExporter(SpanExporter):
    def __init__(self, how: str) -> None:
        self.how, self.batches = how, 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches += 1
        if self.how == "raise":
            raise ConnectionError("collector is down")
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        return None


@pytest.mark.parametrize("how", ["raise", "failure"])
def test_the_embedded_queue_logs_a_failing_exporter_once(how, caplog) -> None:
    from toolguard.runtime.telemetry.span_queue import SpanQueue

    exporter = FailingExporter(how)
    queue = SpanQueue(exporter, schedule_delay=0.01)
    provider = TracerProvider()
    provider.add_span_processor(queue)
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        for _ in range(4):
            assert session(provider) == REFERENCE
            assert queue.force_flush()  # one batch per session, each refused
    provider.shutdown()
    assert exporter.batches >= 4 and queue.lost > 0
    logged = [r for r in caplog.records if r.name == "toolguard" and r.levelno >= logging.WARNING]
    messages = [r.getMessage() for r in logged]
    assert len(messages) == len(set(messages)), messages
