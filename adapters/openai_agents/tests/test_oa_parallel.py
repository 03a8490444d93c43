"""One model turn, three parallel calls: steps follow emission order, not execution order."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, RunHooks, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_support import NO_SDK_TRACING, Episode, Telemetry

import toolguard as tg
from toolguard_openai_agents import guard_agent, guard_tools, guarded_run


class ReverseGate(RunHooks[Any]):
    """Lets each call reach its tool only after the call emitted after it has started its
    body: the SDK creates the tasks a, b, c, and the guard sees them c, b, a."""

    def __init__(self) -> None:
        self.started = {key: asyncio.Event() for key in "abc"}

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        after = {"call_a": "b", "call_b": "c"}.get(context.tool_call_id)
        if after is not None:
            await self.started[after].wait()


def fetch_agent(gate: ReverseGate, order: list[str]) -> Agent[Any]:
    @function_tool
    async def fetch(key: str) -> str:
        """Fetch one value."""
        order.append(key)
        gate.started[key].set()
        return f"value of {key}"

    turn = [function_call("fetch", {"key": k}, call_id=f"call_{k}") for k in "abc"]
    model = ScriptedModel([turn, [assistant_message("all fetched")]])
    return Agent(name="fetcher", model=model, tools=[fetch])


def steps(traj: tg.Trajectory) -> dict[str | None, int | None]:
    return {v.call_id: v.step for v in traj.verdicts}


def test_parallel_calls_take_steps_in_emission_order(episode: Episode, otel: Telemetry) -> None:
    guard = otel.guard()
    gate, order = ReverseGate(), []
    agent = guard_agent(fetch_agent(gate, order), guard)

    result, traj = episode(guard, agent, "fetch a, b and c", "parallel", hooks=gate)

    assert result is not None and result.final_output == "all fetched"
    assert order == ["c", "b", "a"]  # the guard checked them in this order...
    assert steps(traj) == {"call_a": 1, "call_b": 2, "call_c": 3}  # ...and numbered them so
    assert (traj.length, traj.first_error_depth) == (3, 4)
    spans = {
        s.attributes["gen_ai.tool.call.id"]: s.attributes["toolguard.step"]
        for s in otel.call_spans()
    }
    assert spans == {"call_a": 1, "call_b": 2, "call_c": 3}


def test_without_the_agent_hooks_steps_follow_arrival(otel: Telemetry) -> None:
    # The control: guarded tools alone (no turn numbering) take steps as calls arrive, which
    # is what the reservation above corrects.
    guard = otel.guard()
    gate, order = ReverseGate(), []
    plain = fetch_agent(gate, order)
    agent = plain.clone(tools=guard_tools(plain.tools, guard))
    with guarded_run(guard, "arrival") as traj:
        Runner.run_sync(agent, "fetch", hooks=gate, run_config=NO_SDK_TRACING)
    assert order == ["c", "b", "a"]
    assert steps(traj) == {"call_c": 1, "call_b": 2, "call_a": 3}
