"""One execute_tool span per call: Pydantic AI's own where its instrumentation opens one, the
guard's where it does not, and none at all with tracing off."""

from __future__ import annotations

from collections import Counter
from typing import Any

import toolguard as tg
from conftest import Telemetry, scripted
from pydantic_ai import Agent
from pydantic_ai.messages import ToolCallPart

from toolguard_pydantic_ai import ToolGuard


def add(a: int) -> int:
    return a


def boom(a: int) -> int:
    raise ValueError("boom")


TURN = [
    ToolCallPart("add", {"a": 1}, tool_call_id="ok"),
    ToolCallPart("nope", {}, tool_call_id="unknown"),
    ToolCallPart("add", {"a": "zz"}, tool_call_id="invalid"),
    ToolCallPart("boom", {"a": 1}, tool_call_id="raises"),
    ToolCallPart("add", {"a": 2}, tool_call_id="blocked"),
]


def blocks_two(a: int) -> bool:
    return a != 2


def guarded_agent(guard: tg.Guard, *capabilities: Any) -> Agent[None, str]:
    contracts = {"add": {"preconditions": [tg.Precondition("not_two", blocks_two, "not 2")]}}
    return Agent(
        scripted(TURN),
        tools=[add, boom],
        capabilities=[*capabilities, ToolGuard(guard, contracts=contracts)],
    )


def test_with_pydantic_ais_instrumentation_its_spans_carry_the_guards_attributes(
    otel: Telemetry,
) -> None:
    guard = otel.guard()
    guarded_agent(guard, otel.instrumentation()).run_sync("go")

    calls = otel.call_spans()
    assert Counter(s.attributes["gen_ai.tool.call.id"] for s in calls) == Counter(
        ["ok", "unknown", "invalid", "raises", "blocked"]
    )  # exactly one span with the guard's attributes per call
    owner = {s.attributes["gen_ai.tool.call.id"]: s.instrumentation_scope.name for s in calls}
    # Pydantic AI's span wherever it opened one around the tool; the guard's own where it
    # opened none (an unknown tool) or opened and closed one inside its validation hook.
    assert owner == {
        "ok": "pydantic-ai",
        "raises": "pydantic-ai",
        "blocked": "pydantic-ai",
        "unknown": "toolguard",
        "invalid": "toolguard",
    }
    per_call = Counter(s.attributes.get("gen_ai.tool.call.id") for s in otel.tool_spans())
    assert per_call == {"ok": 1, "raises": 1, "blocked": 1, "unknown": 1, "invalid": 2}
    summary = otel.summary(calls[0].attributes["toolguard.trajectory.id"])
    assert summary.attributes["toolguard.trajectory.length"] == 5
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 2
    # Call spans nest below the summary span, which nests below Pydantic AI's agent span.
    assert {s.parent.span_id for s in calls if s.parent} == {summary.context.span_id}


def test_without_instrumentation_the_guard_opens_one_span_per_call(otel: Telemetry) -> None:
    guard = otel.guard()
    guarded_agent(guard).run_sync("go")
    spans = otel.tool_spans()
    assert {s.instrumentation_scope.name for s in spans} == {"toolguard"}
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in spans) == sorted(
        p.tool_call_id for p in TURN
    )
    assert spans == otel.call_spans()


def test_with_tracing_off_nothing_is_traced_and_the_trajectory_still_counts(
    otel: Telemetry,
) -> None:
    guard = tg.Guard()  # no provider: the global one, a no-op here
    with guard.trajectory("quiet") as traj:
        guarded_agent(guard).run_sync("go")
    assert otel.spans() == []
    assert (traj.length, traj.first_error_depth) == (5, 2)


def test_guard_that_keeps_its_own_spans(otel: Telemetry) -> None:
    guard = otel.guard(reuse_framework_spans=False)
    guarded_agent(guard, otel.instrumentation()).run_sync("go")
    assert {s.instrumentation_scope.name for s in otel.call_spans()} == {"toolguard"}
    assert len(otel.call_spans()) == 5
