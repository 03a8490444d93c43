"""An agent used by a tool of another agent (agent delegation): the delegate's calls are
nested in the tool's call, checked and traced but no steps of the caller's trajectory."""

from __future__ import annotations

import toolguard as tg
from conftest import Telemetry, scripted
from pydantic_ai import Agent
from pydantic_ai.messages import ToolCallPart

from toolguard_pydantic_ai import ToolGuard


def echo(text: str) -> str:
    return text


def delegating_agent(guard: tg.Guard) -> Agent[None, str]:
    delegate = Agent(
        scripted(
            [
                ToolCallPart("echo", {"text": "a"}, tool_call_id="d1"),
                ToolCallPart("echo", {"text": "b"}, tool_call_id="d2"),
            ]
        ),
        tools=[echo],
        capabilities=[ToolGuard(guard)],
    )

    async def ask_delegate(question: str) -> str:
        return (await delegate.run(question)).output

    return Agent(
        scripted([ToolCallPart("ask_delegate", {"question": "q"}, tool_call_id="o1")]),
        tools=[ask_delegate],
        capabilities=[ToolGuard(guard, trajectory_id=lambda ctx: "outer")],
    )


def test_a_delegates_parallel_calls_reserve_no_steps_of_the_callers_trajectory(
    otel: Telemetry,
) -> None:
    agent = delegating_agent(otel.guard())
    agent.run_sync("go")
    # The model of the outer agent emitted one call: T = 1, and that step has its verdict.
    summary = otel.summary("outer").attributes or {}
    assert summary["toolguard.trajectory.length"] == 1
    steps = [(s.attributes or {}).get("toolguard.step") for s in otel.call_spans()]
    assert steps == [1]
    # The delegate's two calls are still checked and traced, below the outer call.
    inner = [
        s for s in otel.spans() if (s.attributes or {}).get("gen_ai.tool.call.id") in {"d1", "d2"}
    ]
    assert [str((s.attributes or {})["toolguard.decision"]) for s in inner] == ["allowed"] * 2
    outer = next(s for s in otel.call_spans() if s.name == "execute_tool ask_delegate")
    assert all(s.context.trace_id == outer.context.trace_id for s in inner)


def test_a_delegates_calls_in_a_trajectory_of_the_users(otel: Telemetry) -> None:
    guard = otel.guard()
    agent = delegating_agent(guard)
    with guard.trajectory("task") as traj:
        agent.run_sync("go")
    assert traj.length == 1
    assert [(v.step, v.tool) for v in traj.verdicts] == [(1, "ask_delegate")]
