"""A tracer provider, tracer or span that misbehaves: every entry point returns what it
would with working telemetry, nothing raises into the caller, and each failure is logged
once (not once per call), naming what failed, with no argument value in the log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import INVALID_SPAN, Span, Tracer
from opentelemetry.trace import TracerProvider as ApiTracerProvider

import toolguard as tg

SECRET = "SECRET-ARGUMENT-4711"


class BrokenSpan(Span):
    """A span whose methods named in ``broken`` raise; it records when ``recording``."""

    def __init__(self, broken: frozenset[str], recording: bool) -> None:
        self.broken, self.recording = broken, recording

    def _use(self, what: str) -> None:
        if what in self.broken:
            raise RuntimeError(f"span.{what} is broken")

    def end(self, end_time: int | None = None) -> None:
        self._use("end")

    def get_span_context(self) -> Any:
        self._use("get_span_context")
        return INVALID_SPAN.get_span_context()

    def set_attributes(self, attributes: Any) -> None:
        self._use("set_attributes")

    def set_attribute(self, key: str, value: Any) -> None:
        self._use("set_attribute")

    def add_event(self, name: str, attributes: Any = None, timestamp: Any = None) -> None:
        self._use("add_event")

    def add_link(self, context: Any, attributes: Any = None) -> None:
        self._use("add_link")

    def update_name(self, name: str) -> None:
        self._use("update_name")

    def is_recording(self) -> bool:
        self._use("is_recording")
        return self.recording

    def set_status(self, status: Any, description: str | None = None) -> None:
        self._use("set_status")

    def record_exception(self, *args: Any, **kwargs: Any) -> None:
        self._use("record_exception")


class BrokenTracer(Tracer):
    def __init__(self, broken: frozenset[str], recording: bool) -> None:
        self.broken, self.recording = broken, recording

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> Span:
        if "start_span" in self.broken:
            raise RuntimeError("tracer.start_span is broken")
        return BrokenSpan(self.broken, self.recording)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer.start_as_current_span is broken")


class BrokenProvider(ApiTracerProvider):
    def __init__(self, *broken: str, recording: bool = True) -> None:
        self.broken, self.recording = frozenset(broken), recording

    def get_tracer(self, *args: Any, **kwargs: Any) -> Tracer:
        if "get_tracer" in self.broken:
            raise RuntimeError("provider.get_tracer is broken")
        return BrokenTracer(self.broken, self.recording)


def session(provider: Any) -> list[Any]:
    """Every entry point once: direct, by name (mapping and JSON), a blocked call, a tool
    that raises, async, a batch, check + finish, in a trajectory and outside one."""
    guard = tg.Guard(tracer_provider=provider)

    @guard.tool(produces={"id": "item"})
    def make(n: int) -> dict[str, str]:
        return {"id": f"item-{n}"}

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id.upper()

    @guard.tool
    async def shout(text: str) -> str:
        return text.upper()

    @guard.tool
    def fail() -> None:
        raise ValueError("nope")

    def verdict(value: Any) -> Any:
        if isinstance(value, tg.Rejection):
            return (value.decision, value.cause, value.check)
        return value

    seen: list[Any] = []
    with guard.trajectory("t") as traj:
        seen.append(make(3))
        seen.append(use("item-3"))
        seen.append(verdict(guard.call("use", {"item_id": "item-9"})))
        seen.append(guard.call("use", '{"item_id": "item-3"}'))
        seen.append(verdict(guard.call("fail")))
        seen.append(asyncio.run(guard.acall("shout", {"text": "a"})))
        batch = asyncio.run(
            guard.acall_batch([("shout", {"text": "b"}), ("use", {"item_id": "x"})])
        )
        seen.append([verdict(v) for v in batch])
        pending = guard.check("use", {"item_id": "item-3"})
        seen.append((pending.rejection, dict(pending.arguments)))
        pending.finish("ITEM-3")
        traj.success = True
        seen.append([(v.step, v.decision, v.cause) for v in traj.verdicts])
    seen.append(use("item-3"))  # outside any trajectory
    seen.append(tg.current_trajectory())
    return seen


REFERENCE = session(None)

FAULTS = [
    ("get_tracer",),
    ("start_span",),
    ("is_recording",),
    ("set_attributes", "set_attribute", "set_status", "add_event", "end"),
    ("get_span_context",),
    (
        "is_recording",
        "set_attributes",
        "set_attribute",
        "set_status",
        "add_event",
        "end",
        "get_span_context",
        "record_exception",
        "update_name",
    ),
]


@pytest.mark.parametrize("recording", [True, False], ids=["recording", "non-recording"])
@pytest.mark.parametrize("broken", FAULTS, ids=["+".join(f) for f in FAULTS])
def test_broken_telemetry_changes_no_call(broken: tuple[str, ...], recording: bool, caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger="toolguard"):
        assert session(BrokenProvider(*broken, recording=recording)) == REFERENCE
    assert session(None) == REFERENCE  # no later call is affected


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


class RaisingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise ConnectionError("collector is down")

    def shutdown(self) -> None:
        return None


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


class BrokenContext(ContextVarsRuntimeContext):
    """The context API's runtime, its methods named in ``broken`` raising."""

    def __init__(self, broken: frozenset[str]) -> None:
        super().__init__()
        self.broken = broken

    def attach(self, context: Any) -> Any:
        if "attach" in self.broken:
            raise RuntimeError("context.attach is broken")
        return super().attach(context)

    def detach(self, token: Any) -> None:
        if "detach" in self.broken:
            raise RuntimeError("context.detach is broken")
        super().detach(token)

    def get_current(self) -> Any:
        if "get_current" in self.broken:
            raise RuntimeError("context.get_current is broken")
        return super().get_current()


@pytest.mark.parametrize(
    "broken", [("attach",), ("detach",), ("get_current",), ("attach", "detach", "get_current")]
)
def test_a_broken_context_api_changes_no_call(broken, otel, monkeypatch, caplog) -> None:
    monkeypatch.setattr(otel_context, "_RUNTIME_CONTEXT", BrokenContext(frozenset(broken)))
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        for _ in range(3):
            assert session(otel.provider) == REFERENCE
    logged = [r for r in caplog.records if r.name == "toolguard" and r.levelno >= logging.ERROR]
    if broken != ("detach",):  # the API's detach logs (each time) and swallows its own error
        assert logged
    messages = [r.getMessage() for r in logged]
    assert len(messages) == len(set(messages)), messages
    monkeypatch.undo()
    assert session(otel.provider) == REFERENCE  # no later call is affected


def plan_session(provider: Any) -> list[Any]:
    """verify_plan (sync and async) on a fork, then a real call."""
    disk: dict[str, set[str]] = {"dirs": {"/"}}
    guard = tg.Guard(state=disk, dry_run=tg.DeepCopyFork(), tracer_provider=provider)

    @guard.tool
    def mkdir(state: Annotated[dict[str, set[str]], tg.State], path: str) -> str:
        if path in state["dirs"]:
            raise FileExistsError(path)
        state["dirs"].add(path)
        return path

    twice = [tg.PlanStep("mkdir", {"path": "/a"}), tg.PlanStep("mkdir", {"path": "/a"})]
    seen: list[Any] = []
    with guard.trajectory("p"):
        for verdict in (
            guard.verify_plan(twice),
            guard.verify_plan([tg.PlanStep("mkdir", {"path": "/b"})]),
            asyncio.run(guard.averify_plan(twice)),
        ):
            seen.append((verdict.ok, verdict.failed, verdict.cause))
        seen.append(guard.call("mkdir", {"path": "/c"}))
    seen.append(sorted(disk["dirs"]))
    return seen


@pytest.mark.parametrize("recording", [True, False], ids=["recording", "non-recording"])
@pytest.mark.parametrize("broken", FAULTS, ids=["+".join(f) for f in FAULTS])
def test_broken_telemetry_changes_no_plan_verdict(broken, recording, caplog) -> None:
    reference = plan_session(None)
    blocked = (False, 1, "state_consistency")
    assert reference[:3] == [blocked, (True, None, None), blocked]
    with caplog.at_level(logging.DEBUG, logger="toolguard"):
        assert plan_session(BrokenProvider(*broken, recording=recording)) == reference


class WrittenSpan(BrokenSpan):
    """A non-recording span that notes every write to it (none is due)."""

    writes: ClassVar[list[str]] = []

    def _use(self, what: str) -> None:
        if what not in ("end", "is_recording", "get_span_context"):
            self.writes.append(what)


class WrittenTracer(BrokenTracer):
    def start_span(self, name: str, *args: Any, **kwargs: Any) -> Span:
        return WrittenSpan(self.broken, recording=False)


class WrittenProvider(BrokenProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> Tracer:
        return WrittenTracer(self.broken, recording=False)


@pytest.mark.parametrize("record_content", [False, True])
def test_nothing_is_written_on_a_span_that_does_not_record(record_content, monkeypatch) -> None:
    monkeypatch.setattr(WrittenSpan, "writes", [])
    provider = WrittenProvider(recording=False)
    assert plan_session(provider) == plan_session(None)
    assert session(provider) == REFERENCE
    guard = tg.Guard(tracer_provider=provider, record_content=record_content)

    @guard.tool
    def echo(x: int) -> int:
        return x

    with guard.trajectory("w"):
        assert echo(1) == 1
        assert guard.call("echo", {"x": "no"}).cause == "schema"
    assert WrittenSpan.writes == []


class BrokenFrameworkSpan(BrokenSpan):
    """The framework's current span (``execute_tool use``) whose name or attributes raise."""

    @property
    def name(self) -> str:
        self._use("name")
        return "execute_tool use"

    @property
    def attributes(self) -> dict[str, Any]:
        raise RuntimeError("span.attributes is broken")


@pytest.mark.parametrize("recording", [True, False], ids=["recording", "non-recording"])
@pytest.mark.parametrize("broken", [("is_recording",), ("name",), ("name", "set_attributes")])
def test_a_broken_framework_span_changes_no_call(broken, recording, otel, caplog) -> None:
    """The guard asks the current span whether it is the framework's span of this call (to
    write on it rather than open a second): a span that raises then is not reused."""
    framework = BrokenFrameworkSpan(frozenset(broken), recording)
    guard = otel.guard()

    @guard.tool
    def use(item_id: str) -> str:
        return item_id.upper()

    with caplog.at_level(logging.DEBUG, logger="toolguard"):
        with trace.use_span(framework, end_on_exit=False):
            assert use("a") == "A"
            assert guard.call("use", {"item_id": "b"}) == "B"
        with guard.trajectory("f"), trace.use_span(framework, end_on_exit=False):
            assert use("c") == "C"
            assert guard.call("use", {"item_id": 5}).cause == "schema"
    assert len(otel.call_spans()) == 4  # each call got a span of its own


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
