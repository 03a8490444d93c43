"""The guard's own call span where no instrumentation opens one (``_call_span.py``): opened
when the tool runs, it starts at the check, is current while the tool runs (the tool's own
spans nest below it), ends after the verdict, and a call whose tool raised or was blocked
gets one all the same."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import toolguard as tg
from conftest import Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.tools import ToolException, tool
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from toolguard_langchain import ToolGuardMiddleware, declare_tool


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_blocked_and_failed_calls_get_the_guards_span(spans: Spans, mode: str) -> None:
    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return "found"

    @tool
    def fail() -> str:
        """Fail."""
        raise ToolException("down")

    fail.handle_tool_error = True  # answered with an error message
    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, lookup, refs={"q": "q"})  # nothing produces a q: blocked
    model = scripted(
        turn(call("lookup", {"q": "x"}, "c1"), call("fail", {}, "c2")),
        "done",
    )
    agent = create_agent(model, [lookup, fail], middleware=[ToolGuardMiddleware(guard)])
    inputs: Any = {"messages": [("user", "go")]}
    with guard.trajectory("t"):
        if mode == "async":
            asyncio.run(agent.ainvoke(inputs))
        else:
            agent.invoke(inputs)
    assert spans.steps() == {
        "c1": (1, "lookup", "blocked", "dependency"),
        "c2": (2, "fail", "allowed", "state_consistency"),
    }
    (summary,) = spans.summaries()
    for span in spans.calls():
        assert span.parent is not None and span.parent.span_id == summary.context.span_id
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time < span.end_time


def test_spans_the_tool_makes_nest_below_its_call_span(spans: Spans) -> None:
    tracer = spans.provider.get_tracer("the tool's own")
    seen = []

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        seen.append(trace.get_current_span())
        with tracer.start_as_current_span("http GET"):
            return "found"

    guard = tg.Guard(tracer_provider=spans.provider)
    agent = create_agent(
        scripted(turn(call("lookup", {"q": "x"}, "c1")), "done"),
        [lookup],
        middleware=[ToolGuardMiddleware(guard)],
    )
    agent.invoke({"messages": [("user", "go")]})  # type: ignore[call-overload]
    (span,) = spans.calls()
    (http,) = [s for s in spans.finished() if s.name == "http GET"]
    assert http.parent is not None and http.parent.span_id == span.context.span_id
    assert seen[0].get_span_context().span_id == span.context.span_id
    # It started at the check, before the tool ran, and ended after the tool returned.
    assert span.start_time is not None and http.start_time is not None
    assert span.start_time < http.start_time
    assert span.end_time is not None and http.end_time is not None
    assert span.end_time >= http.end_time
    assert (span.attributes or {})["toolguard.decision"] == "allowed"


class Broken(SpanProcessor):
    """A span processor that raises on every span: telemetry trouble."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("processor down")

    def on_end(self, span: Any) -> None:
        raise RuntimeError("processor down")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_telemetry_trouble_never_breaks_a_call(mode: str) -> None:
    ran = []

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        ran.append(q)
        return "found"

    provider = TracerProvider()
    provider.add_span_processor(Broken())
    guard = tg.Guard(tracer_provider=provider)
    agent = create_agent(
        scripted(turn(call("lookup", {"q": "x"}, "c1")), "done"),
        [lookup],
        middleware=[ToolGuardMiddleware(guard)],
    )
    inputs: Any = {"messages": [("user", "go")]}
    out = asyncio.run(agent.ainvoke(inputs)) if mode == "async" else agent.invoke(inputs)
    assert ran == ["x"]
    assert out["messages"][-2].content == "found"
