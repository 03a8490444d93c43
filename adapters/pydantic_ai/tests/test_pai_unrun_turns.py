"""Calls the model emitted that never start, whatever their number: a lone call counts as
a turn of several does (one cancelled step), and so do the calls of a turn the app stopped
driving before it ran (``agent.iter`` left after the model's response)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import Telemetry, scripted
from pydantic import BaseModel
from pydantic_ai import Agent, CallToolsNode
from pydantic_ai.messages import ToolCallPart
from test_pai_conversations import PHONE, chat
from test_pai_unstarted_calls import decisions, summary_length

from toolguard_pydantic_ai import ToolGuard


def echo(text: str) -> str:
    return text


class Answer(BaseModel):
    answer: str


def test_a_lone_call_skipped_because_a_final_result_came_first_ends_cancelled(
    otel: Telemetry,
) -> None:
    guard = otel.guard()
    model = scripted(
        [
            ToolCallPart("final_result", {"answer": "x"}, tool_call_id="out"),
            ToolCallPart("echo", {"text": "a"}, tool_call_id="k1"),
        ]
    )
    capability = ToolGuard(guard, trajectory_id=lambda ctx: "early")
    agent = Agent(
        model, tools=[echo], output_type=Answer, end_strategy="early", capabilities=[capability]
    )
    agent.run_sync("go")
    assert summary_length(otel, "early") == 1  # as with two calls: each one a step
    assert decisions(otel) == [(1, "k1", "cancelled")]


@pytest.mark.parametrize("count", [1, 2])
def test_iter_left_before_a_turn_runs_ends_its_calls_cancelled(otel: Telemetry, count: int) -> None:
    guard = otel.guard()
    parts = [ToolCallPart("echo", {"text": str(i)}, tool_call_id=f"c{i}") for i in range(count)]
    parts.append(ToolCallPart("missing", {}, tool_call_id="x"))  # one the guard blocks
    capability = ToolGuard(guard, trajectory_id=lambda ctx: "left")
    agent = Agent(scripted(parts), tools=[echo], capabilities=[capability])

    async def leave() -> Any:
        async with agent.iter("go") as run:
            async for node in run:
                if isinstance(node, CallToolsNode):
                    return node  # the model answered; the app stops before the calls run

    asyncio.run(leave())
    assert summary_length(otel, "left") == count + 1
    expected = [(i + 1, f"c{i}", "cancelled") for i in range(count)]
    assert decisions(otel) == [*expected, (count + 1, "x", "blocked")]


def test_a_run_that_ends_with_its_output_adds_no_span(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted([ToolCallPart("final_result", {"answer": "x"}, tool_call_id="out")])
    capability = ToolGuard(guard, trajectory_id=lambda ctx: "output")
    agent = Agent(model, tools=[echo], output_type=Answer, capabilities=[capability])
    assert agent.run_sync("go").output == Answer(answer="x")
    assert summary_length(otel, "output") == 0
    assert decisions(otel) == []


def test_iter_left_before_a_turn_with_the_output_counts_only_the_tool_calls(
    otel: Telemetry,
) -> None:
    guard = otel.guard()
    model = scripted(
        [
            ToolCallPart("final_result", {"answer": "x"}, tool_call_id="out"),
            ToolCallPart("echo", {"text": "a"}, tool_call_id="k1"),
        ]
    )
    capability = ToolGuard(guard, trajectory_id=lambda ctx: "left")
    agent = Agent(model, tools=[echo], output_type=Answer, capabilities=[capability])

    async def leave() -> None:
        async with agent.iter("go") as run:
            async for node in run:
                if isinstance(node, CallToolsNode):
                    return

    asyncio.run(leave())
    assert summary_length(otel, "left") == 1  # the output tool is the run's answer
    assert decisions(otel) == [(1, "k1", "cancelled")]


def test_a_legal_call_of_a_later_turn_left_unrun_is_cancelled_not_blocked(
    otel: Telemetry,
) -> None:
    # The id was shown in an earlier run of the chat: the unrun call is judged with it bound.
    agent, removed, guard = chat(otel, "id_8923")
    first = agent.run_sync(f"Find {PHONE}")

    async def leave() -> None:
        async with agent.iter("Yes, remove her.", message_history=first.all_messages()) as run:
            async for node in run:
                if isinstance(node, CallToolsNode):
                    return

    with guard.trajectory("later") as traj:
        asyncio.run(leave())
    assert removed == []
    assert [(v.tool, v.valid, v.decision) for v in traj.verdicts] == [
        ("remove_contact", True, "cancelled")
    ]
