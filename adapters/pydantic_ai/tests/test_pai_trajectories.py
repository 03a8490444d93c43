"""The episode boundary: one trajectory per agent run, or the one the user gives."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import toolguard as tg
from conftest import Telemetry, scripted
from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from toolguard_pydantic_ai import ToolGuard


def echo(text: str) -> str:
    return text


def two_calls() -> list[ToolCallPart]:
    return [
        ToolCallPart("echo", {"text": "a"}, tool_call_id="e1"),
        ToolCallPart("echo", {"text": "b"}, tool_call_id="e2"),
    ]


def test_each_run_is_a_trajectory_with_labels_and_outcome(otel: Telemetry) -> None:
    guard = otel.guard()
    capability = ToolGuard(
        guard,
        labels=lambda ctx: {"model": ctx.model.model_name, "method": "react"},
        success=lambda result: result.output == "done",
    )
    agent = Agent(scripted(two_calls()), tools=[echo], capabilities=[capability])
    result = agent.run_sync("say a and b")

    summary = otel.summary(result.run_id)  # the run's id by default
    attributes = summary.attributes or {}
    assert attributes["toolguard.trajectory.length"] == 2
    assert attributes["toolguard.trajectory.first_error_depth"] == 3
    assert attributes["toolguard.trajectory.success"] is True
    assert attributes["toolguard.label.method"] == "react"
    assert attributes["toolguard.label.model"] == "function:respond:"
    assert attributes["gen_ai.conversation.id"] == result.conversation_id
    assert len(guard.trajectories) == 0  # nothing kept once the run ended


def test_the_prompt_is_seen_by_the_information_check(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted(
        [
            ToolCallPart("echo", {"text": "ticket-42"}, tool_call_id="seen"),
            ToolCallPart("echo", {"text": "ticket-99"}, tool_call_id="invented"),
        ]
    )
    capability = ToolGuard(guard, contracts={"echo": {"grounded": ["text"]}})
    with guard.trajectory("grounded") as traj:
        Agent(model, tools=[echo], capabilities=[capability]).run_sync("Close ticket-42")
    verdicts = {v.call_id: v for v in traj.verdicts}
    assert verdicts["seen"].valid
    assert verdicts["invented"].cause == "information"


def test_a_given_trajectory_spans_runs_and_its_owner_ends_it(otel: Telemetry) -> None:
    guard = otel.guard()
    with guard.trajectory("conversation") as traj:
        agent = Agent(
            scripted(two_calls()), tools=[echo], capabilities=[ToolGuard(guard, trajectory=traj)]
        )
        agent.run_sync("first")
        assert not traj.ended
        agent.run_sync("second")
        assert traj.length == 4
    assert traj.ended


def test_a_given_unstarted_trajectory_is_started_and_ended_with_the_run(otel: Telemetry) -> None:
    guard = otel.guard()
    traj = guard.trajectory("task-7", labels={"task": "7"})
    agent = Agent(
        scripted(two_calls()),
        tools=[echo],
        capabilities=[ToolGuard(guard, trajectory=traj, success=lambda result: True)],
    )
    asyncio.run(agent.run("go"))
    assert traj.ended and traj.success is True
    assert otel.summary("task-7").attributes["toolguard.label.task"] == "7"


def test_concurrent_runs_of_one_agent_keep_their_own_trajectories(otel: Telemetry) -> None:
    guard = otel.guard()
    agent = Agent(scripted(two_calls()), tools=[echo], capabilities=[ToolGuard(guard)])

    async def both() -> list[str]:
        results = await asyncio.gather(agent.run("one"), agent.run("two"))
        return [r.run_id for r in results]

    for run_id in asyncio.run(both()):
        assert otel.summary(run_id).attributes["toolguard.trajectory.length"] == 2
    by_trajectory: dict[str, list[int]] = {}
    for span in otel.call_spans():
        trajectory_id = str(span.attributes["toolguard.trajectory.id"])
        by_trajectory.setdefault(trajectory_id, []).append(int(span.attributes["toolguard.step"]))
    assert sorted(map(sorted, by_trajectory.values())) == [[1, 2], [1, 2]]


def test_a_failed_run_still_writes_its_summary(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted(*[[ToolCallPart("missing", {}, tool_call_id=f"m{i}")] for i in range(3)])
    capability = ToolGuard(guard, labels={"model": "m"}, success=lambda result: True)
    agent = Agent(model, tools=[echo], retries=1, capabilities=[capability])
    with pytest.raises(UnexpectedModelBehavior):
        agent.run_sync("go")
    (summary,) = [s for s in otel.spans() if s.name == "toolguard.trajectory"]
    assert summary.attributes["toolguard.trajectory.length"] == 2
    assert summary.attributes["toolguard.trajectory.first_error.cause"] == "schema"
    # Issue 23, defect 5: with its labels, the outcome unknown (not False).
    assert summary.attributes["toolguard.label.model"] == "m"
    assert "toolguard.trajectory.success" not in summary.attributes
    assert not summary.status.is_ok


def test_a_run_the_process_leaves_mid_way_writes_its_summary_at_exit() -> None:
    # exit_script.py exits while its run waits in a tool (wrap_run never returns); its spans
    # go to stdout.
    here = Path(__file__).resolve().parent
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run(
        [sys.executable, str(here / "exit_script.py")],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert "exiting mid-run" in out
    summaries = [line for line in out.splitlines() if line.startswith("toolguard.trajectory ")]
    assert len(summaries) == 1, out
    assert "'toolguard.trajectory.id': 'left-open'" in summaries[0]
    assert "'toolguard.trajectory.length': 1" in summaries[0]
    assert "'toolguard.label.model': 'm'" in summaries[0]
    assert "toolguard.trajectory.success" not in summaries[0]  # unknown, not False


def test_options_are_checked() -> None:
    guard = tg.Guard()
    with pytest.raises(ValueError, match="rejection"):
        ToolGuard(guard, rejection="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_errors"):
        ToolGuard(guard, tool_errors="swallow")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"toolguard\.Guard"):
        ToolGuard(object())  # type: ignore[arg-type]


def test_a_contract_naming_no_argument_fails_loudly(otel: Telemetry) -> None:
    guard = otel.guard()
    capability = ToolGuard(guard, contracts={"echo": {"refs": {"txt": "kind"}}})
    agent = Agent(scripted(two_calls()), tools=[echo], capabilities=[capability])
    with pytest.raises(tg.ToolDefinitionError, match="txt"):
        agent.run_sync("go")


def test_without_pydantic_ai_the_error_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['pydantic_ai'] = None\n"
        "import toolguard_pydantic_ai\n"
        "try:\n"
        "    toolguard_pydantic_ai.ToolGuard\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "pydantic-ai-slim>=2.68,<3" in out
    assert "pip install -e . -e adapters/pydantic_ai" in out


def test_iter_and_run_stream_are_runs_too(otel: Telemetry) -> None:
    guard = otel.guard()

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if any(isinstance(m, ModelResponse) for m in messages):
            yield "done"
        else:
            yield {
                0: DeltaToolCall(name="echo", json_args='{"text": "a"}', tool_call_id="s1"),
                1: DeltaToolCall(name="missing", json_args="{}", tool_call_id="s2"),
            }

    # iter() asks the model for whole responses, run_stream() for a stream: the same script.
    calls = [
        ToolCallPart("echo", {"text": "a"}, tool_call_id="s1"),
        ToolCallPart("missing", {}, tool_call_id="s2"),
    ]
    model = FunctionModel(scripted(calls).function, stream_function=stream)
    iterated, streamed = guard.trajectory("iter"), guard.trajectory("stream")

    async def both() -> None:
        agent = Agent(model, tools=[echo], capabilities=[ToolGuard(guard, trajectory=iterated)])
        async with agent.iter("go") as run:
            async for _node in run:
                pass
        agent = Agent(model, tools=[echo], capabilities=[ToolGuard(guard, trajectory=streamed)])
        async with agent.run_stream("go") as result:
            assert await result.get_output() == "done"

    asyncio.run(both())
    for traj in (iterated, streamed):
        assert traj.ended
        steps = sorted((v.step, v.call_id, v.check) for v in traj.verdicts)
        assert steps == [(1, "s1", None), (2, "s2", "schema.tool")]
