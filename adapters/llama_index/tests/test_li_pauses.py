"""A tool that waits for a human (``ctx.wait_for_event``) through a real FunctionAgent: the
wait passes through the guard to the workflow, and the call keeps its step when it resumes."""

# No `from __future__ import annotations`: LlamaIndex finds a tool's Context parameter by its
# annotation, which must be the class, not a string.
import asyncio
from typing import Any

import pytest
from conftest import Telemetry, scripted
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent

from toolguard_llama_index import guard_agent

wired: list[int] = []


async def wire(ctx: Context, amount: int) -> str:
    """Wire money, once the user approves."""
    answer = await ctx.wait_for_event(
        HumanResponseEvent,
        waiter_id=f"approve {amount}",
        waiter_event=InputRequiredEvent(prefix=f"approve {amount}?"),
    )
    if answer.response != "yes":
        return "not approved"
    wired.append(amount)
    return "wired"


def echo(text: str) -> dict[str, str]:
    """Echo a text."""
    return {"text": text}


def ask_and_answer(agent: Any, answer: str) -> tuple[list[str], list[ToolCallResult]]:
    """Run the agent, answering each question the user is asked; the questions and the tool
    results LlamaIndex streams (what the model gets)."""

    async def go() -> tuple[list[str], list[ToolCallResult]]:
        asked: list[str] = []
        results: list[ToolCallResult] = []
        handler = agent.run("wire 5 and echo hi")
        async for ev in handler.stream_events():
            if isinstance(ev, InputRequiredEvent):
                asked.append(ev.prefix)
                handler.ctx.send_event(HumanResponseEvent(response=answer))
            elif isinstance(ev, ToolCallResult):
                results.append(ev)
        await handler
        return asked, results

    return asyncio.run(go())


@pytest.mark.parametrize("tool_errors", ["deliver", "raise"])
def test_a_tool_waiting_for_the_user_pauses_and_keeps_its_step(
    otel: Telemetry, tool_errors: Any
) -> None:
    wired.clear()
    guard = otel.guard()
    model = scripted([("wire", {"amount": 5}), ("echo", {"text": "hi"})], "Wired.")
    agent = guard_agent(
        FunctionAgent(tools=[wire, echo], llm=model), guard, tool_errors=tool_errors
    )
    with guard.trajectory("approval") as traj:
        asked, results = ask_and_answer(agent, "yes")
    assert asked == ["approve 5?"]
    assert wired == [5]
    answers = {r.tool_name: r.tool_output for r in results}
    assert answers["wire"].content == "wired" and not answers["wire"].is_error
    # The paused attempt (cancelled) and the resumed one share the call's step: T = 2, no
    # error (FED = T + 1).
    assert (traj.length, traj.first_error_depth) == (2, 3)
    spans = sorted(
        (s.attributes["toolguard.step"], s.attributes["toolguard.decision"], s.name)
        for s in otel.call_spans()
    )
    assert spans == [
        (1, "allowed", "execute_tool wire"),
        (1, "cancelled", "execute_tool wire"),
        (2, "allowed", "execute_tool echo"),
    ]
    wire_ids = {
        s.attributes["gen_ai.tool.call.id"]
        for s in otel.call_spans()
        if s.name == "execute_tool wire"
    }
    assert wire_ids == {"t0-0"}


def test_a_resumed_call_is_checked_again(otel: Telemetry) -> None:
    # The user says no: the resumed attempt runs to the tool's own answer, checked and valid.
    wired.clear()
    guard = otel.guard()
    agent = guard_agent(
        FunctionAgent(tools=[wire, echo], llm=scripted([("wire", {"amount": 7})])), guard
    )
    with guard.trajectory("refused") as traj:
        asked, results = ask_and_answer(agent, "no")
    assert asked == ["approve 7?"] and wired == []
    assert [r.tool_output.content for r in results] == ["not approved"]
    assert sorted((v.step, v.decision) for v in traj.verdicts) == [
        (1, "allowed"),
        (1, "cancelled"),
    ]
