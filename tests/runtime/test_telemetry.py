"""Telemetry never breaks a tool call; guard errors fail closed (or loudly open); opt-in
content; no SDK provider; the user's global provider is followed, never overridden."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import toolguard as tg


class RaisingExporter(SpanExporter):
    def __init__(self) -> None:
        self.attempts = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.attempts += len(spans)
        raise ConnectionError("collector is down")

    def shutdown(self) -> None:
        return None


class RaisingProcessor(SpanProcessor):
    def __init__(self, on_start: bool = False, on_end: bool = True) -> None:
        self.raise_on_start = on_start
        self.raise_on_end = on_end
        self.ended = 0

    def on_start(self, span, parent_context=None) -> None:
        if self.raise_on_start:
            raise RuntimeError("on_start broke")

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1
        if self.raise_on_end:
            raise RuntimeError("on_end broke")


def exercise(provider) -> list:
    """A little session of good, rejected and failing calls; returns what the caller saw."""
    guard = tg.Guard(tracer_provider=provider)

    @guard.tool(produces={"id": "item"})
    def make(n: int) -> dict:
        return {"id": f"item-{n}", "payload": list(range(n))}

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id.upper()

    @guard.tool
    def fail() -> None:
        raise ValueError("nope")

    seen = []
    with tg.trajectory("t", tracer_provider=provider) as traj:
        seen.append(make(3))
        seen.append(use("item-3"))
        seen.append(guard.call("use", {"item_id": "item-9"}))
        seen.append(guard.call("use", '{"item_id": "item-3"}'))
        seen.append(guard.call("fail"))
        traj.success = True
    assert tg.current_trajectory() is None
    return seen


def check_session(seen: list) -> None:
    assert seen[0] == {"id": "item-3", "payload": [0, 1, 2]}
    assert seen[1] == "ITEM-3"
    assert isinstance(seen[2], tg.Rejection) and seen[2].cause == "dependency"
    assert seen[3] == "ITEM-3"
    assert isinstance(seen[4], tg.Rejection) and seen[4].cause == "state_consistency"


def test_reference_session_with_a_working_exporter(otel):
    check_session(exercise(otel.provider))
    assert len(otel.call_spans("t")) == 5
    assert len(otel.summary_spans()) == 1


def test_exporter_that_raises_leaves_calls_working():
    exporter = RaisingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    check_session(exercise(provider))
    assert exporter.attempts == 6  # it was really called, and it really raised
    provider.shutdown()


def test_batch_exporter_that_raises_leaves_calls_working():
    exporter = RaisingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=1))
    check_session(exercise(provider))
    provider.force_flush()
    provider.shutdown()
    assert exporter.attempts >= 1


@pytest.mark.parametrize(("on_start", "on_end"), [(False, True), (True, False), (True, True)])
def test_span_processor_that_raises_leaves_calls_working(otel, caplog, on_start, on_end):
    broken = RaisingProcessor(on_start=on_start, on_end=on_end)
    otel.provider.add_span_processor(broken)
    with caplog.at_level(logging.ERROR, logger="toolguard"):
        check_session(exercise(otel.provider))
    if on_end and not on_start:
        assert broken.ended == 6  # five calls and the summary
        assert any("ending a span failed" in r.getMessage() for r in caplog.records)
    if on_start:
        assert any("could not start span" in r.getMessage() for r in caplog.records)


def test_tool_exception_still_propagates_with_broken_telemetry(otel):
    otel.provider.add_span_processor(RaisingProcessor(on_start=True, on_end=True))
    guard = otel.guard()

    @guard.tool
    def fail() -> None:
        raise LookupError("the real error")

    with pytest.raises(LookupError, match="the real error"):
        fail()

    @guard.tool(preconditions=[tg.Precondition("never", lambda: False)])
    def never() -> None:
        return None

    with pytest.raises(tg.ToolCallRejected):
        never()


# -- guard errors ---------------------------------------------------------------------------


def broken_guard(otel, **options):
    guard = otel.guard(**options)
    ran = []

    def buggy(state, x):
        return 1 / 0

    @guard.tool(preconditions=[tg.Precondition("x_is_known", buggy, "x must be known")])
    def f(x: int) -> int:
        ran.append(x)
        return x

    return guard, f, ran


def test_predicate_that_raises_fails_closed(otel, caplog):
    _, f, ran = broken_guard(otel)
    with (
        caplog.at_level(logging.ERROR, logger="toolguard"),
        pytest.raises(tg.ToolCallRejected) as info,
    ):
        f(1)
    exc = info.value
    assert ran == []
    assert exc.cause == "precondition"
    assert exc.check == "precondition.x_is_known"
    assert "x_is_known" in exc.message
    assert "ZeroDivisionError" in exc.message
    assert "fail closed" in exc.message
    assert exc.message.startswith("guard error:")
    assert "could not be verified" in exc.model_message
    a = otel.only_call().attributes
    assert a["toolguard.check"] == "precondition.x_is_known"
    assert "x_is_known" in a["toolguard.message"]
    assert a["toolguard.decision"] == "blocked"
    assert any("failing closed" in r.getMessage() for r in caplog.records)


def test_predicate_that_raises_in_log_mode_is_logged(otel):
    _, f, ran = broken_guard(otel, mode="log")
    assert f(2) == 2
    assert ran == [2]
    a = otel.only_call().attributes
    assert a["toolguard.valid"] is False
    assert a["toolguard.decision"] == "logged"
    assert a["toolguard.check"] == "precondition.x_is_known"


def test_fail_open_passes_and_logs_a_warning(otel, caplog):
    _, f, ran = broken_guard(otel, on_guard_error="fail_open")
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        assert f(3) == 3
    assert ran == [3]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings, "fail_open must log loudly"
    text = warnings[0].getMessage()
    assert "x_is_known" in text and "ZeroDivisionError" in text and "failing open" in text
    assert otel.only_call().attributes["toolguard.valid"] is True


def test_error_result_predicate_that_raises_fails_closed(otel):
    guard = otel.guard()

    @guard.tool(error_result=lambda r: r["status"] == "bad")
    def f() -> str:
        return "a string, not a dict"

    result = f()
    assert isinstance(result, tg.Rejection) is False  # executed: the result comes back
    assert result == "a string, not a dict"
    a = otel.only_call().attributes
    assert a["toolguard.check"] == "state.error_result"
    assert a["toolguard.cause"] == "state_consistency"
    assert "error_result" in a["toolguard.message"]


def test_postcondition_that_raises_fails_closed(otel):
    guard = otel.guard()

    @guard.tool(postconditions=[tg.Postcondition("sane", lambda result: result.missing)])
    def f() -> int:
        return 1

    assert f() == 1
    a = otel.only_call().attributes
    assert a["toolguard.check"] == "postcondition.sane"
    assert "sane" in a["toolguard.message"] and "AttributeError" in a["toolguard.message"]


# -- content recording ----------------------------------------------------------------------


def test_content_not_recorded_by_default(otel):
    guard = otel.guard()

    @guard.tool
    def echo(secret: str) -> str:
        return secret

    echo("hunter2")
    a = otel.only_call().attributes
    assert "gen_ai.tool.call.arguments" not in a
    assert "gen_ai.tool.call.result" not in a
    assert all("hunter2" not in str(v) for v in a.values())


def test_content_recorded_on_opt_in_and_truncated(otel):
    guard = otel.guard(record_content=True)

    @guard.tool
    def echo(text: str) -> dict:
        return {"echo": text}

    echo("hi")
    a = otel.only_call().attributes
    assert json.loads(a["gen_ai.tool.call.arguments"]) == {"text": "hi"}
    assert json.loads(a["gen_ai.tool.call.result"]) == {"echo": "hi"}

    otel.clear()
    echo("x" * 100_000)
    a = otel.only_call().attributes
    for key in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"):
        assert isinstance(a[key], str)
        assert 100 < len(a[key]) <= 4200
        assert a[key].startswith("{")


def test_content_of_pydantic_results_is_json(otel):
    from pydantic import BaseModel

    class Out(BaseModel):
        id: str

    guard = otel.guard(record_content=True)

    @guard.tool
    def make() -> Out:
        return Out(id="x1")

    make()
    assert json.loads(otel.only_call().attributes["gen_ai.tool.call.result"]) == {"id": "x1"}


# -- no SDK provider ------------------------------------------------------------------------


@pytest.mark.parametrize("provider", [None, trace.NoOpTracerProvider()])
def test_calls_work_without_an_sdk_provider(provider):
    check_session(exercise(provider))


def test_global_provider_is_followed_and_never_overridden():
    """Runs in a subprocess: OpenTelemetry lets the global provider be set once per process."""
    code = textwrap.dedent(
        """
        import toolguard as tg
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        guard = tg.Guard()  # created before any provider exists

        @guard.tool
        def f(x: int) -> int:
            return x

        f(1)  # no provider yet: a no-op, and it works

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)

        with tg.trajectory("g") as t:
            f(2)
            t.success = True
        assert trace.get_tracer_provider() is provider, "toolguard replaced the provider"
        names = sorted(s.name for s in exporter.get_finished_spans())
        print(names)
        assert names == ["execute_tool f", "toolguard.trajectory"], names
        print("OK")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "OK" in proc.stdout
    assert "Overriding of current TracerProvider" not in proc.stderr
