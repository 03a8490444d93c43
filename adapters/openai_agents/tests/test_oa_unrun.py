"""Calls whose steps a turn reserved and that never reached their tool: the run was
cancelled or failed first. Each ends with a verdict and a span as the run's block ends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import (
    Agent,
    AgentHooks,
    FunctionTool,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    function_tool,
    tool_input_guardrail,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_contacts import CONTACT_ID, CONTRACTS, PHONE, address_book, approval_agent, contact_tools
from oa_support import NO_SDK_TRACING, Episode, Telemetry, decisions, streamed

import toolguard as tg
from toolguard_openai_agents import guard_agent, guarded_run


def two_searches(ran: list[str]) -> Agent[Any]:
    @function_tool
    async def search(phone: str) -> str:
        """Find a contact by phone."""
        ran.append(phone)
        return "id_1"

    turn = [
        function_call("search", {"phone": "1"}, call_id="c1"),
        function_call("search", {"phone": "2"}, call_id="c2"),
    ]
    model = ScriptedModel([turn, [assistant_message("done")]])
    return Agent(name="a", model=model, tools=[search])


def test_a_run_cancelled_before_its_calls_start_ends_them_cancelled(otel: Telemetry) -> None:
    guard, ran = otel.guard(), []
    traj = streamed(guard, guard_agent(two_searches(ran), guard), "immediate")

    assert ran == []
    assert traj.length == 2
    assert decisions(traj) == [("c1", 1, "cancelled", True), ("c2", 2, "cancelled", True)]
    spans = {s.attributes["toolguard.step"]: s.attributes for s in otel.call_spans()}
    assert {k: v["toolguard.decision"] for k, v in spans.items()} == {
        1: "cancelled",
        2: "cancelled",
    }
    assert otel.summary().attributes["toolguard.trajectory.length"] == 2


def test_a_run_cancelled_after_its_turn_adds_no_span(otel: Telemetry) -> None:
    guard, ran = otel.guard(), []
    traj = streamed(guard, guard_agent(two_searches(ran), guard), "after_turn")

    assert sorted(ran) == ["1", "2"]  # the turn's calls ran, then the run stopped
    assert decisions(traj) == [("c1", 1, "allowed", True), ("c2", 2, "allowed", True)]
    assert len(otel.call_spans()) == 2


def test_a_normal_run_adds_no_span(episode: Episode, otel: Telemetry) -> None:
    guard, ran = otel.guard(), []
    result, traj = episode(guard, guard_agent(two_searches(ran), guard), "go")

    assert result is not None and result.final_output == "done"
    assert decisions(traj) == [("c1", 1, "allowed", True), ("c2", 2, "allowed", True)]
    assert len(otel.call_spans()) == 2


class Failing(AgentHooks[Any]):
    """The app's own hook fails once the model answered: the run raises before any tool."""

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        raise RuntimeError("the app's hook failed")


def test_a_run_that_raises_before_its_calls_start_ends_them_cancelled(
    episode: Episode, otel: Telemetry
) -> None:
    guard, ran = otel.guard(), []
    agent = two_searches(ran)
    agent.hooks = Failing()
    _, traj = episode(guard, guard_agent(agent, guard), "go", raises=RuntimeError)

    assert ran == []
    assert decisions(traj) == [("c1", 1, "cancelled", True), ("c2", 2, "cancelled", True)]
    assert len(otel.call_spans()) == 2


def test_an_unrun_call_its_checks_refuse_ends_blocked(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    search, remove = contact_tools(contacts)
    turn = [
        function_call("search_contact", {"phone": PHONE}, call_id="c1"),
        function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c2"),  # unseen id
    ]
    agent = Agent(name="a", model=ScriptedModel([turn]), tools=[search, remove])
    traj = streamed(guard, guard_agent(agent, guard, contracts=CONTRACTS), "immediate")

    assert decisions(traj) == [("c1", 1, "cancelled", True), ("c2", 2, "blocked", False)]
    assert traj.first_error_depth == 2


@pytest.mark.parametrize("approve", [True, False])
def test_a_call_awaiting_approval_keeps_its_step_for_the_resumed_run(
    otel: Telemetry, approve: bool
) -> None:
    # The run pauses with the call pending: it is not cancelled, so the resumed run's call
    # (same trajectory, its own block) takes the step reserved for it. A rejected one never
    # runs: it ends cancelled at that step, once.
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = approval_agent(guard, contacts, final="finished")

    with guard.trajectory("approval") as traj:
        with guarded_run(guard, trajectory=traj):
            first = Runner.run_sync(agent, "remove", run_config=NO_SDK_TRACING)
        [pending] = first.interruptions
        assert decisions(traj) == [("c1", 1, "allowed", True)]  # c2 waits for its human
        state = first.to_state()
        state.approve(pending) if approve else state.reject(pending)
        with guarded_run(guard, trajectory=traj):
            Runner.run_sync(agent, state, run_config=NO_SDK_TRACING)

    assert traj.length == 2
    ended = "allowed" if approve else "cancelled"
    assert decisions(traj) == [("c1", 1, "allowed", True), ("c2", 2, ended, True)]
    assert len(otel.call_spans()) == 2


@tool_input_guardrail
def refuse_phone_1(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    if '"1"' in data.context.tool_arguments:
        return ToolGuardrailFunctionOutput.reject_content("not that number")
    return ToolGuardrailFunctionOutput.allow()


def test_a_call_a_tool_guardrail_refuses_ends_cancelled(otel: Telemetry) -> None:
    # The SDK answered it without running the tool: it ends as a call the run gave up on.
    guard, ran = otel.guard(), []
    agent = two_searches(ran)
    [search] = agent.tools
    assert isinstance(search, FunctionTool)
    search.tool_input_guardrails = [refuse_phone_1]
    with guarded_run(guard, "refused") as traj:
        result = Runner.run_sync(guard_agent(agent, guard), "go", run_config=NO_SDK_TRACING)

    assert result.final_output == "done" and ran == ["2"]
    assert traj.length == 2
    assert decisions(traj) == [("c1", 1, "cancelled", True), ("c2", 2, "allowed", True)]


class Late(AgentHooks[Any]):
    """The model answers only once the app has left the run's block."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, items: Any) -> None:
        self.asked.set()
        await self.answer.wait()


def test_a_turn_answered_after_the_block_reserves_no_steps(otel: Telemetry) -> None:
    # The stream was left before the model answered: the summary is written (T = 0), and the
    # late turn's calls run outside the trajectory instead of adding steps nothing ends.
    guard, ran = otel.guard(), list[str]()
    agent = two_searches(ran)
    late = Late()
    agent.hooks = late

    async def main() -> tg.Trajectory:
        async with guarded_run(guard, "left") as traj:
            result = Runner.run_streamed(guard_agent(agent, guard), "go", run_config=NO_SDK_TRACING)
            await late.asked.wait()
        late.answer.set()
        async for _ in result.stream_events():
            pass
        return traj

    traj = asyncio.run(main())
    assert sorted(ran) == ["1", "2"]
    assert (traj.length, traj.verdicts) == (0, [])
    assert (otel.summary().attributes or {})["toolguard.trajectory.length"] == 0
