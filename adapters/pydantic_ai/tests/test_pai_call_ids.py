"""Call ids are unique within a model turn only: some OpenAI-compatible servers number every
turn's calls ``call_0, call_1, ...`` (issue 23, defect 4). A refused call whose id an earlier
turn already used must still get its verdict."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Telemetry, scripted
from pydantic_ai import Agent
from pydantic_ai.messages import ToolCallPart

from toolguard_pydantic_ai import ToolGuard


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_id_reused_in_a_later_turn_keeps_its_verdict(otel: Telemetry, mode: str) -> None:
    guard = otel.guard()

    def add(a: int, b: int) -> int:
        return a + b

    model = scripted(
        [ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="call_0")],
        [
            ToolCallPart("add", {"a": "one", "b": 2}, tool_call_id="call_0"),  # refused args
            ToolCallPart("add", {"a": 3, "b": 4}, tool_call_id="call_1"),
        ],
        [
            ToolCallPart("subtract", {"a": 3, "b": 1}, tool_call_id="call_0"),  # no such tool
            ToolCallPart("add", {"a": 5, "b": 6}, tool_call_id="call_1"),
        ],
    )
    traj = guard.trajectory("reused-ids")
    agent = Agent(model, tools=[add], capabilities=[ToolGuard(guard, trajectory=traj)])
    if mode == "sync":
        agent.run_sync("add")
    else:
        asyncio.run(agent.run("add"))

    steps = sorted((v.step, v.call_id, v.tool, v.check) for v in traj.verdicts)
    assert steps == [
        (1, "call_0", "add", None),
        (2, "call_0", "add", "schema.args"),
        (3, "call_1", "add", None),
        (4, "call_0", "subtract", "schema.tool"),
        (5, "call_1", "add", None),
    ]
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (5, 2, "schema")
