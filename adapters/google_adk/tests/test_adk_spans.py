"""Spans: ADK's own execute_tool span carries the guard's attributes (one span per call);
with reuse off, or with ADK's span not recording, the guard opens its own."""

from __future__ import annotations

from conftest import Telemetry, chat, scripted
from google.adk.agents import LlmAgent

from toolguard_google_adk import ToolGuardPlugin


def lookup(key: str) -> dict[str, str]:
    """Look a key up."""
    return {"id": key}


def test_adks_span_of_each_call_carries_the_guards_attributes(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted([("lookup", {"key": "a"}), ("lookup", {})])
    chat(LlmAgent(name="a", model=model, tools=[lookup]), [ToolGuardPlugin(guard)]).send("go")
    spans = otel.call_spans()
    assert len(spans) == 2  # one per call, blocked or not
    assert {s.name for s in spans} == {"execute_tool lookup"}
    assert {s.instrumentation_scope.name for s in spans} == {"gcp.vertex.agent"}
    # ADK's span over the turn's parallel calls is ADK's alone: no step, no toolguard.*.
    (merged,) = [s for s in otel.tool_spans() if s not in spans]
    assert merged.name == "execute_tool (merged)"
    by_step = {s.attributes["toolguard.step"]: s for s in spans}
    assert by_step[1].attributes["toolguard.decision"] == "allowed"
    assert by_step[2].attributes["toolguard.decision"] == "blocked"
    assert by_step[2].attributes["toolguard.cause"] == "schema"
    assert not by_step[2].status.is_ok
    # ADK writes its own values of these after the callbacks (README, "Spans"): pinned, so a
    # change in ADK shows here.
    assert by_step[2].attributes["error.type"] == "TOOL_ERROR"
    assert by_step[1].attributes["gen_ai.tool.type"] == "FunctionTool"
    # The call spans sit in the same trace as the trajectory's summary.
    (summary,) = otel.summaries()
    assert {s.context.trace_id for s in spans} == {summary.context.trace_id}


def test_with_reuse_off_the_guard_opens_its_own_span(otel: Telemetry) -> None:
    guard = otel.guard(reuse_framework_spans=False)
    model = scripted([("lookup", {"key": "a"})])
    chat(LlmAgent(name="a", model=model, tools=[lookup]), [ToolGuardPlugin(guard)]).send("go")
    spans = otel.tool_spans()
    assert sorted(s.instrumentation_scope.name for s in spans) == ["gcp.vertex.agent", "toolguard"]
    (guards,) = otel.call_spans()
    assert guards.instrumentation_scope.name == "toolguard"
    assert guards.attributes["gen_ai.tool.type"] == "function"
