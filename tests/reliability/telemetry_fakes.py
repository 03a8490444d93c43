"""Fakes for the telemetry fault tests: a tracer provider, tracer and span that raise
where told, an exporter that raises, and a session of every entry point of the guard."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Annotated, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
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


class RaisingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise ConnectionError("collector is down")

    def shutdown(self) -> None:
        return None
