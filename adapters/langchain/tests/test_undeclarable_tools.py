"""A tool whose argument schema LangChain runs with but the guard cannot compile (a JSON
Schema dict with ``"required": true`` on a property, as some MCP servers send), declared by
the middleware on its first call: the agent keeps running. Failing closed (the default) its
calls are refused with the reason, and logged once; failing open they run."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import toolguard as tg
from conftest import Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool

from toolguard_langchain import ToolGuardMiddleware

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "required": True}}}
SCRIPT = (
    turn(call("weather", {"city": "Paris"}, "w1")),
    turn(call("weather", {"city": "Rome"}, "w2")),
    turn(call("clock", {}, "k1")),
    "Done.",
)


def tools(ran: list[str]) -> list[BaseTool]:
    def forecast(city: str) -> str:
        ran.append(city)
        return f"sunny in {city}"

    weather = StructuredTool.from_function(
        func=forecast, name="weather", description="Weather for a city.", args_schema=SCHEMA
    )

    @tool
    def clock() -> str:
        """The time."""
        return "noon"

    return [weather, clock]


def answers(out: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m.status, m.text) for m in out["messages"] if isinstance(m, ToolMessage)]


def invoke(agent: Any, mode: str) -> dict[str, Any]:
    inputs = {"messages": [("user", "Weather in Paris and Rome, and the time?")]}
    if mode == "async":
        return dict(asyncio.run(agent.ainvoke(inputs)))
    return dict(agent.invoke(inputs))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_fails_closed_with_the_reason_and_the_agent_runs_on(
    mode: str, caplog: pytest.LogCaptureFixture, spans: Spans
) -> None:
    ran: list[str] = []
    guard = tg.Guard(tracer_provider=spans.provider)
    agent = create_agent(scripted(*SCRIPT), tools(ran), middleware=[ToolGuardMiddleware(guard)])
    with caplog.at_level(logging.ERROR, logger="toolguard"):
        out = invoke(agent, mode)

    assert ran == []
    (first, second, clock) = answers(out)
    assert first == second
    status, text = first
    assert status == "error"
    assert "`weather` cannot be used" in text
    assert "properties/city/required" in text
    assert clock == ("success", "noon")
    logged = [r.getMessage() for r in caplog.records if "cannot judge" in r.getMessage()]
    assert len(logged) == 1, logged
    assert "tool 'weather'" in logged[0]
    assert "properties/city/required" in logged[0]
    steps = spans.steps()
    assert steps["w1"] == (1, "weather", "blocked", "schema")
    assert steps["w2"] == (2, "weather", "blocked", "schema")
    assert steps["k1"][:3] == (3, "clock", "allowed")
    checks = {
        (s.attributes or {}).get("gen_ai.tool.call.id"): (s.attributes or {}).get("toolguard.check")
        for s in spans.calls()
    }
    assert checks["w1"] == "schema.undeclarable"


def test_fails_open_when_the_guard_does(caplog: pytest.LogCaptureFixture, spans: Spans) -> None:
    ran: list[str] = []
    guard = tg.Guard(tracer_provider=spans.provider, on_guard_error="fail_open")
    agent = create_agent(scripted(*SCRIPT), tools(ran), middleware=[ToolGuardMiddleware(guard)])
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        out = invoke(agent, "sync")

    assert ran == ["Paris", "Rome"]
    assert [status for status, _ in answers(out)] == ["success"] * 3
    logged = [r.getMessage() for r in caplog.records if "cannot judge" in r.getMessage()]
    assert len(logged) == 1 and "failing open" in logged[0], logged
    assert [step[:3] for step in spans.steps().values()] == [
        (1, "weather", "allowed"),
        (2, "weather", "allowed"),
        (3, "clock", "allowed"),
    ]
