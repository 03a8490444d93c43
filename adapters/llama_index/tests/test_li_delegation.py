"""An agent run by a tool of another agent (an agent used as a tool): the inner agent's calls
are nested in the tool's call, checked and traced but no steps of the caller's trajectory."""

from __future__ import annotations

from conftest import Telemetry, run, scripted
from llama_index.core.agent.workflow import FunctionAgent

from toolguard_llama_index import guard_agent


def echo(text: str) -> str:
    """Echo the text."""
    return text


def test_an_inner_agents_parallel_calls_reserve_no_steps_of_the_callers_trajectory(
    otel: Telemetry,
) -> None:
    guard = otel.guard()
    inner = guard_agent(
        FunctionAgent(
            name="inner",
            tools=[echo],
            llm=scripted([("echo", {"text": "a"}), ("echo", {"text": "b"}), ("missing", {})]),
        ),
        guard,
    )

    async def ask(question: str) -> str:
        """Ask the inner agent."""
        return str(await inner.run(question))

    outer = guard_agent(
        FunctionAgent(name="outer", tools=[ask], llm=scripted([("ask", {"question": "q"})])),
        guard,
    )
    with guard.trajectory("task") as traj:
        run(outer, "go")
    # The outer model emitted one call: T = 1, and that step has its verdict.
    assert traj.length == 1
    assert [(v.step, v.tool) for v in traj.verdicts] == [(1, "ask")]
    # The inner agent's calls are still checked and traced, but take no step.
    inner_spans = [s for s in otel.spans() if s.name != "execute_tool ask"]
    inner_spans = [s for s in inner_spans if s.name.startswith("execute_tool ")]
    assert sorted(s.name for s in inner_spans) == [
        "execute_tool echo",
        "execute_tool echo",
        "execute_tool missing",
    ]
    assert all("toolguard.step" not in (s.attributes or {}) for s in inner_spans)
