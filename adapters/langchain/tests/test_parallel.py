"""One model turn with three parallel calls: steps 1, 2, 3 by call id, whatever order the
tool node checks and finishes them in."""

from __future__ import annotations

import asyncio
import threading

import pytest
import toolguard as tg
from conftest import Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from toolguard_langchain import ToolCallGuard, ToolGuardMiddleware, declare_tool

TURN = turn(
    call("ring", {"n": 1}, "call_a"),
    call("ring", {"n": 2}, "call_b"),
    call("ring", {"n": 3}, "call_c"),
)
EXPECTED = {
    "call_a": (1, "ring", "allowed", None),
    "call_b": (2, "ring", "allowed", None),
    "call_c": (3, "ring", "allowed", None),
}


class Reversed:
    """Held on events so that call n passes its check only after call n + 1 has: the checks
    arrive in the reverse of the emission order (3, 2, 1), in three worker threads."""

    def __init__(self) -> None:
        self.checked = {n: threading.Event() for n in (1, 2, 3)}
        self.order: list[int] = []

    def precondition(self) -> tg.Precondition:
        def in_reverse(n: int) -> bool:
            if n < 3:
                assert self.checked[n + 1].wait(timeout=30), "the calls did not run in parallel"
            self.order.append(n)
            self.checked[n].set()
            return True

        return tg.Precondition("in_reverse", in_reverse, "checked in reverse order")


def test_three_parallel_calls_take_steps_by_call_id(spans: Spans) -> None:
    held = Reversed()

    @tool
    def ring(n: int) -> str:
        """Ring bell n."""
        return f"rang {n}"

    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, ring, preconditions=[held.precondition()])
    agent = create_agent(scripted(TURN, "done"), [ring], middleware=[ToolGuardMiddleware(guard)])
    agent.invoke({"messages": [("user", "ring all three")]})

    assert held.order == [3, 2, 1]
    assert spans.steps() == EXPECTED
    (summary,) = spans.summaries()
    assert summary.attributes["toolguard.trajectory.length"] == 3


def test_three_parallel_async_calls_finish_in_reverse_and_keep_their_steps(
    spans: Spans,
) -> None:
    async def scenario() -> list[int]:
        done = {n: asyncio.Event() for n in (1, 2, 3)}
        finished: list[int] = []

        @tool
        async def ring(n: int) -> str:
            """Ring bell n."""
            if n < 3:
                await asyncio.wait_for(done[n + 1].wait(), timeout=30)
            finished.append(n)
            done[n].set()
            return f"rang {n}"

        guard = tg.Guard(tracer_provider=spans.provider)
        agent = create_agent(
            scripted(TURN, "done"), [ring], middleware=[ToolGuardMiddleware(guard)]
        )
        await agent.ainvoke({"messages": [("user", "ring all three")]})
        return finished

    assert asyncio.run(scenario()) == [3, 2, 1]
    assert spans.steps() == EXPECTED


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_plain_tool_node_numbers_a_turn_by_call_id(mode: str, spans: Spans) -> None:
    held = Reversed()

    @tool
    def ring(n: int) -> str:
        """Ring bell n."""
        return f"rang {n}"

    guard = tg.Guard(tracer_provider=spans.provider)
    if mode == "sync":
        declare_tool(guard, ring, preconditions=[held.precondition()])
    guarded = ToolCallGuard(guard)
    node = ToolNode(
        [ring], wrap_tool_call=guarded.wrap_tool_call, awrap_tool_call=guarded.awrap_tool_call
    )
    builder = StateGraph(MessagesState)
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    history = {"messages": [AIMessage(content="", tool_calls=TURN.tool_calls)]}
    with guard.trajectory("plain-node") as traj:
        out = graph.invoke(history) if mode == "sync" else asyncio.run(graph.ainvoke(history))

    assert [m.content for m in out["messages"][1:]] == ["rang 1", "rang 2", "rang 3"]
    if mode == "sync":
        assert held.order == [3, 2, 1]
    assert spans.steps() == EXPECTED
    assert traj.length == 3 and traj.first_error_depth == 4
