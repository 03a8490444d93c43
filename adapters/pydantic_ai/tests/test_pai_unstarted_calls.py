"""A turn's calls that never start (the stream abandoned, the task cancelled, a final result
first): each reserved step still ends with a verdict and a span, decision cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import Telemetry, scripted
from pydantic import BaseModel
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    ModelMessage,
    ModelResponse,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from toolguard_pydantic_ai import ToolGuard


def echo(text: str) -> str:
    return text


class Answer(BaseModel):
    answer: str


def decisions(otel: Telemetry) -> list[tuple[Any, Any, Any]]:
    """(step, call id, decision) of each call span, by step."""
    return sorted(
        (a.get("toolguard.step"), a.get("gen_ai.tool.call.id"), a.get("toolguard.decision"))
        for a in (s.attributes or {} for s in otel.call_spans())
    )


def summary_length(otel: Telemetry, trajectory_id: str) -> Any:
    return (otel.summary(trajectory_id).attributes or {})["toolguard.trajectory.length"]


def streamed(parts: list[ToolCallPart]) -> FunctionModel:
    """A model that streams ``parts`` as its first turn, then says "done"."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if any(isinstance(m, ModelResponse) for m in messages):
            yield "done"
            return
        for index, part in enumerate(parts):
            yield {
                index: DeltaToolCall(
                    name=part.tool_name,
                    json_args=part.args_as_json_str(),
                    tool_call_id=part.tool_call_id,
                )
            }

    whole = scripted(parts).function  # iter() and run() ask for whole responses
    assert whole is not None
    return FunctionModel(whole, stream_function=stream)


def test_a_stream_abandoned_before_its_calls_start_ends_them_cancelled(otel: Telemetry) -> None:
    guard = otel.guard()
    parts = [
        ToolCallPart("echo", {"text": "a"}, tool_call_id="a1"),
        ToolCallPart("missing", {}, tool_call_id="a2"),  # one the guard blocks: so recorded
    ]
    capability = ToolGuard(guard, trajectory_id=lambda ctx: "abandoned")
    agent = Agent(streamed(parts), tools=[echo], capabilities=[capability])

    async def stop_reading() -> None:
        async with agent.run_stream_events("go") as events:
            async for event in events:
                if isinstance(event, FunctionToolCallEvent):
                    break  # the client went away

    asyncio.run(stop_reading())
    assert summary_length(otel, "abandoned") == 2
    assert decisions(otel) == [(1, "a1", "cancelled"), (2, "a2", "blocked")]


def test_a_cancelled_task_ends_the_calls_that_never_started(otel: Telemetry) -> None:
    guard = otel.guard()
    started = asyncio.Event()

    async def hold(text: str) -> str:
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return text

    parts = [
        ToolCallPart("hold", {"text": "a"}, tool_call_id="h1"),
        ToolCallPart("echo", {"text": "b"}, tool_call_id="h2"),  # waits for the barrier
    ]
    traj = guard.trajectory("cancelled")
    agent = Agent(
        scripted(parts),
        tools=[Tool(hold, sequential=True), echo],
        capabilities=[ToolGuard(guard, trajectory=traj)],
    )

    async def cancel_mid_turn() -> None:
        task = asyncio.create_task(agent.run("go"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_mid_turn())
    assert traj.ended and traj.length == 2
    # The call that was running ends cancelled by its own hook, the other by the run's end,
    # before the trajectory ends: one span each.
    assert decisions(otel) == [(1, "h1", "cancelled"), (2, "h2", "cancelled")]
    assert [(v.step, v.decision) for v in traj.verdicts if v.call_id == "h2"] == [(2, "cancelled")]


def test_calls_skipped_because_a_final_result_came_first_end_cancelled(otel: Telemetry) -> None:
    guard = otel.guard()
    traj = guard.trajectory("early")
    model = scripted(
        [
            ToolCallPart("final_result", {"answer": "x"}, tool_call_id="out"),
            ToolCallPart("echo", {"text": "a"}, tool_call_id="k1"),
            ToolCallPart("echo", {"text": "b"}, tool_call_id="k2"),
        ]
    )
    agent = Agent(
        model,
        tools=[echo],
        output_type=Answer,
        end_strategy="early",
        capabilities=[ToolGuard(guard, trajectory=traj)],
    )
    with traj:
        agent.run_sync("go")
    assert traj.length == 2
    assert decisions(otel) == [(1, "k1", "cancelled"), (2, "k2", "cancelled")]


@pytest.mark.parametrize("how", ["run", "stream_events"])
def test_a_run_that_ends_normally_adds_no_span(otel: Telemetry, how: str) -> None:
    guard = otel.guard()
    parts = [
        ToolCallPart("echo", {"text": "a"}, tool_call_id="n1"),
        ToolCallPart("echo", {"text": "b"}, tool_call_id="n2"),
    ]
    capability = ToolGuard(guard, trajectory_id=lambda ctx: "normal")
    agent = Agent(streamed(parts), tools=[echo], capabilities=[capability])

    async def run() -> None:
        if how == "run":
            assert (await agent.run("go")).output == "done"
            return
        async with agent.run_stream_events("go") as events:
            async for _event in events:
                pass

    asyncio.run(run())
    assert summary_length(otel, "normal") == 2
    assert decisions(otel) == [(1, "n1", "allowed"), (2, "n2", "allowed")]


def test_a_run_that_raises_ends_its_unstarted_calls_cancelled(otel: Telemetry) -> None:
    guard = otel.guard()

    def boom(text: str) -> str:
        raise RuntimeError("the tool broke")

    parts = [
        ToolCallPart("boom", {"text": "a"}, tool_call_id="r1"),
        ToolCallPart("echo", {"text": "b"}, tool_call_id="r2"),  # waits for the barrier
    ]
    traj = guard.trajectory("raised")
    agent = Agent(
        scripted(parts),
        tools=[Tool(boom, sequential=True), echo],
        capabilities=[ToolGuard(guard, trajectory=traj, tool_errors="raise")],
    )
    with traj, pytest.raises(RuntimeError, match="the tool broke"):
        agent.run_sync("go")
    assert traj.length == 2
    assert decisions(otel) == [(1, "r1", "allowed"), (2, "r2", "cancelled")]
