"""A tracer provider, tracer, span or context API that misbehaves: every entry point
returns what it would with working telemetry, nothing raises into the caller, no later call
is affected, and nothing is written on a span that does not record."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace import Span, Tracer
from telemetry_fakes import (
    FAULTS,
    REFERENCE,
    BrokenProvider,
    BrokenSpan,
    BrokenTracer,
    plan_session,
    session,
)

import toolguard as tg


@pytest.mark.parametrize("recording", [True, False], ids=["recording", "non-recording"])
@pytest.mark.parametrize("broken", FAULTS, ids=["+".join(f) for f in FAULTS])
def test_broken_telemetry_changes_no_call(broken: tuple[str, ...], recording: bool, caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger="toolguard"):
        assert session(BrokenProvider(*broken, recording=recording)) == REFERENCE
    assert session(None) == REFERENCE  # no later call is affected


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
