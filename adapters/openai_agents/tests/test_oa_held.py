"""Calls of tools the SDK may hold back on purpose (``needs_approval``, tool input guardrails):
each ends with one verdict and span, except a call paused for a human's approval, which keeps
its reserved step for the resumed run."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from agents import (
    Agent,
    AgentHooks,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    function_tool,
    tool_input_guardrail,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_contacts import CONTACT_ID, CONTRACTS, PHONE, address_book, contact_tools
from oa_support import NO_SDK_TRACING, Episode, Telemetry, decisions, streamed

import toolguard as tg
from toolguard_openai_agents import guard_agent, guarded_run, run_sync

Held = Literal["approval", "guardrail"]


@tool_input_guardrail
def allow(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    return ToolGuardrailFunctionOutput.allow()


def search_and_remove(ran: list[str], held: Held) -> Agent[Any]:
    """One turn: a normal call (c1) beside a call of a tool the SDK may hold (c2)."""

    @function_tool
    async def search(phone: str) -> str:
        """Find a contact by phone."""
        ran.append("search")
        return "id_1"

    @function_tool(needs_approval=held == "approval")
    async def remove(contact_id: str) -> str:
        """Remove a contact."""
        ran.append("remove")
        return "removed"

    if held == "guardrail":
        remove.tool_input_guardrails = [allow]
    turn = [
        function_call("search", {"phone": "1"}, call_id="c1"),
        function_call("remove", {"contact_id": "id_1"}, call_id="c2"),
    ]
    return Agent(
        name="a", model=ScriptedModel([turn, [assistant_message("done")]]), tools=[search, remove]
    )


def assert_both_cancelled(otel: Telemetry, traj: tg.Trajectory) -> None:
    assert traj.length == 2
    assert decisions(traj) == [("c1", 1, "cancelled", True), ("c2", 2, "cancelled", True)]
    spans = sorted(
        (a["toolguard.step"], a["toolguard.decision"], a["toolguard.valid"], "toolguard.cause" in a)
        for a in (s.attributes or {} for s in otel.call_spans())
    )
    # One span per emitted call; a cancellation is valid, with no cause (PROTOCOL 1.1).
    assert spans == [(1, "cancelled", True, False), (2, "cancelled", True, False)]
    assert otel.summary().attributes == {
        "toolguard.trajectory.id": traj.id,
        "toolguard.trajectory.length": 2,
        "toolguard.trajectory.first_error_depth": 3,
    }


@pytest.mark.parametrize("held", ["approval", "guardrail"])
def test_a_cancelled_run_ends_a_held_call_beside_a_normal_one(otel: Telemetry, held: Held) -> None:
    guard, ran = otel.guard(), list[str]()
    traj = streamed(guard, guard_agent(search_and_remove(ran, held), guard), "immediate")

    assert ran == []
    assert_both_cancelled(otel, traj)


class Failing(AgentHooks[Any]):
    """The app's own hook fails once the model answered: the run raises before any tool."""

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        raise RuntimeError("the app's hook failed")


@pytest.mark.parametrize("held", ["approval", "guardrail"])
def test_a_run_that_raises_ends_a_held_call(episode: Episode, otel: Telemetry, held: Held) -> None:
    guard, ran = otel.guard(), list[str]()
    agent = search_and_remove(ran, held)
    agent.hooks = Failing()
    _, traj = episode(guard, guard_agent(agent, guard), "go", raises=RuntimeError)

    assert ran == []
    assert_both_cancelled(otel, traj)


@pytest.mark.parametrize("held", ["approval", "guardrail"])
def test_run_sync_that_raises_ends_a_held_call(otel: Telemetry, held: Held) -> None:
    guard, ran = otel.guard(), list[str]()
    agent = search_and_remove(ran, held)
    agent.hooks = Failing()
    with pytest.raises(RuntimeError):
        run_sync(guard, guard_agent(agent, guard), "go", run_config=NO_SDK_TRACING)

    assert ran == [] and len(otel.call_spans()) == 2
    assert (otel.summary().attributes or {})["toolguard.trajectory.length"] == 2


class Stall(AgentHooks[Any]):
    """The app's hook holds the run once the model answered (the steps are reserved)."""

    def __init__(self) -> None:
        self.answered = asyncio.Event()
        self.release = asyncio.Event()  # never set: the run never gets to its tools

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.answered.set()
        await self.release.wait()


@pytest.mark.parametrize("held", ["approval", "guardrail"])
def test_an_abandoned_stream_ends_a_held_call(otel: Telemetry, held: Held) -> None:
    guard, ran = otel.guard(), list[str]()
    agent = search_and_remove(ran, held)
    stall = Stall()
    agent.hooks = stall

    async def main() -> tg.Trajectory:
        async with guarded_run(guard, "abandoned") as traj:
            Runner.run_streamed(guard_agent(agent, guard), "go", run_config=NO_SDK_TRACING)
            await stall.answered.wait()
        return traj  # the stream is never read; asyncio.run then cancels the run

    traj = asyncio.run(main())
    assert ran == []
    assert_both_cancelled(otel, traj)


def refuse_once() -> Any:
    refused: list[str] = []

    @tool_input_guardrail
    def once(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        if refused:
            return ToolGuardrailFunctionOutput.allow()
        refused.append(data.context.tool_call_id)
        return ToolGuardrailFunctionOutput.reject_content("ask the user first")

    return once


def test_a_guardrail_refusal_is_judged_before_the_next_turn_runs(otel: Telemetry) -> None:
    # c2 is refused, c3 (the same call again) removes the contact. Judged at the end of the
    # run, c2 would look stale (its id invalidated, the contact gone): judged when refused,
    # it was a valid call.
    contacts = address_book()
    guard = otel.guard(state=contacts)
    search, remove = contact_tools(contacts)
    remove.tool_input_guardrails = [refuse_once()]
    model = ScriptedModel(
        [
            [function_call("search_contact", {"phone": PHONE}, call_id="c1")],
            [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c2")],
            [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c3")],
            [assistant_message("done")],
        ]
    )
    agent = guard_agent(
        Agent(name="a", model=model, tools=[search, remove]), guard, contracts=CONTRACTS
    )
    with guarded_run(guard, "refused") as traj:
        result = Runner.run_sync(agent, "remove", run_config=NO_SDK_TRACING)

    assert result.final_output == "done" and contacts == {}
    assert decisions(traj) == [
        ("c1", 1, "allowed", True),
        ("c2", 2, "cancelled", True),
        ("c3", 3, "allowed", True),
    ]
    assert traj.length == 3 and traj.first_error_depth == 4
    assert len(otel.call_spans()) == 3


def test_a_refused_call_its_checks_refuse_ends_blocked_with_its_cause(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    search, remove = contact_tools(contacts)
    remove.tool_input_guardrails = [refuse_once()]
    model = ScriptedModel(
        [
            [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c1")],  # unseen
            [assistant_message("done")],
        ]
    )
    agent = guard_agent(
        Agent(name="a", model=model, tools=[search, remove]), guard, contracts=CONTRACTS
    )
    with guarded_run(guard, "refused") as traj:
        Runner.run_sync(agent, "remove", run_config=NO_SDK_TRACING)

    assert contacts and decisions(traj) == [("c1", 1, "blocked", False)]
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (1, 1, "dependency")
    [span] = otel.call_spans()
    assert (span.attributes or {})["toolguard.cause"] == "dependency"


def paused_beside_a_refusal(guard: tg.Guard, contacts: dict[str, Any]) -> Agent[Any]:
    """One turn: a search (c1), a removal needing approval (c2), a note a guardrail refuses
    (c3); then, resumed, "finished"."""
    search, remove = contact_tools(contacts)
    remove.needs_approval = True

    @function_tool
    def note(text: str) -> str:
        """Write a note."""
        return "noted"

    note.tool_input_guardrails = [refuse_once()]
    turn = [
        function_call("search_contact", {"phone": PHONE}, call_id="c1"),
        function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c2"),
        function_call("note", {"text": "removing"}, call_id="c3"),
    ]
    model = ScriptedModel([turn, [assistant_message("finished")]])
    agent = Agent(name="a", model=model, tools=[search, remove, note])
    return guard_agent(agent, guard, contracts=CONTRACTS)


def test_a_paused_call_keeps_its_step_while_its_refused_sibling_ends(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = paused_beside_a_refusal(guard, contacts)

    with guard.trajectory("paused") as traj:
        with guarded_run(guard, trajectory=traj):
            first = Runner.run_sync(agent, "remove", run_config=NO_SDK_TRACING)
        [pending] = first.interruptions
        assert decisions(traj) == [("c1", 1, "allowed", True), ("c3", 3, "cancelled", True)]
        state = first.to_state()
        state.approve(pending)
        with guarded_run(guard, trajectory=traj):
            second = Runner.run_sync(agent, state, run_config=NO_SDK_TRACING)

    assert second.final_output == "finished" and contacts == {}
    assert traj.length == 3 and len(otel.call_spans()) == 3
    assert (otel.summary().attributes or {})["toolguard.trajectory.length"] == 3
    assert decisions(traj) == [
        ("c1", 1, "allowed", True),
        ("c2", 2, "allowed", True),
        ("c3", 3, "cancelled", True),
    ]


def test_a_call_rejected_in_a_new_run_ends_there_once(otel: Telemetry) -> None:
    # run_sync resuming a RunState is a new trajectory: the rejected call's one verdict is
    # there, as an approved call's would be. The paused run's own trajectory ended with it,
    # so the call ends there too, at the step it took.
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = paused_beside_a_refusal(guard, contacts)
    first = run_sync(guard, agent, "remove", trajectory_id="paused", run_config=NO_SDK_TRACING)
    [pending] = first.interruptions
    state = first.to_state()
    state.reject(pending)
    second = run_sync(guard, agent, state, trajectory_id="resumed", run_config=NO_SDK_TRACING)

    assert second.final_output == "finished" and contacts
    calls: dict[str, list[tuple[Any, Any, Any]]] = {}
    for span in otel.call_spans():
        a = span.attributes or {}
        calls.setdefault(str(a["toolguard.trajectory.id"]), []).append(
            (a["gen_ai.tool.call.id"], a["toolguard.step"], a["toolguard.decision"])
        )
    assert sorted(calls["paused"]) == [
        ("c1", 1, "allowed"),
        ("c2", 2, "cancelled"),
        ("c3", 3, "cancelled"),
    ]
    assert calls["resumed"] == [("c2", 1, "cancelled")]
    lengths = {
        (s.attributes or {})["toolguard.trajectory.id"]: (s.attributes or {})[
            "toolguard.trajectory.length"
        ]
        for s in otel.spans()
        if s.name == "toolguard.trajectory"
    }
    assert lengths == {"paused": 3, "resumed": 1}


def test_a_rejected_call_whose_answer_ends_the_run_ends_once(otel: Telemetry) -> None:
    # stop_on_first_tool: the rejection's message is the resumed run's final output, and no
    # model call follows it.
    contacts = address_book()
    guard = otel.guard(state=contacts)
    search, remove = contact_tools(contacts)
    remove.needs_approval = True
    turn = [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c1")]
    model = ScriptedModel([turn])
    agent = Agent(
        name="a", model=model, tools=[search, remove], tool_use_behavior="stop_on_first_tool"
    )
    agent = guard_agent(agent, guard)

    with guard.trajectory("stopped") as traj:
        with guarded_run(guard, trajectory=traj):
            first = Runner.run_sync(agent, "remove", run_config=NO_SDK_TRACING)
        [pending] = first.interruptions
        state = first.to_state()
        state.reject(pending)
        with guarded_run(guard, trajectory=traj):
            second = Runner.run_sync(agent, state, run_config=NO_SDK_TRACING)

    assert second.final_output and contacts
    assert traj.length == 1 and decisions(traj) == [("c1", 1, "cancelled", True)]
    assert len(otel.call_spans()) == 1
