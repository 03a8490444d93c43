"""Call ids are unique within a model turn only: some OpenAI-compatible servers number every
turn's calls ``call_0, call_1, ...`` (issue 23, defect 4). A later turn reusing an earlier
turn's ids is still numbered in emission order, not in the order its calls reach the guard."""

from __future__ import annotations

import json
import threading
from typing import Any

import toolguard as tg
from conftest import Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import tool

from toolguard_langchain import ToolGuardMiddleware


class SecondFirst(AgentMiddleware):  # type: ignore[type-arg]
    """Outside the guard: the call with ``n == 1`` reaches the guard only after the one with
    ``n == 2`` (emitted after it) has gone through it (held on an event, not a sleep)."""

    def __init__(self) -> None:
        super().__init__()
        self.two_done = threading.Event()

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        n = request.tool_call["args"]["n"]
        if n == 1:
            assert self.two_done.wait(timeout=30), "the calls did not run in parallel"
        try:
            return handler(request)
        finally:
            if n == 2:
                self.two_done.set()


def test_a_later_turn_reusing_call_ids_keeps_emission_order(spans: Spans) -> None:
    @tool
    def ring(n: int) -> str:
        """Ring bell n."""
        return f"rang {n}"

    guard = tg.Guard(tracer_provider=spans.provider, record_content=True)
    script = (
        turn(call("ring", {"n": 0}, "call_0"), call("ring", {"n": 10}, "call_1")),
        turn(call("ring", {"n": 1}, "call_0"), call("ring", {"n": 2}, "call_1")),
        "done",
    )
    middleware = [SecondFirst(), ToolGuardMiddleware(guard)]
    agent = create_agent(scripted(*script), [ring], middleware=middleware)
    agent.invoke({"messages": [("user", "ring")]})

    steps = {
        json.loads(str(s.attributes["gen_ai.tool.call.arguments"]))["n"]: s.attributes[
            "toolguard.step"
        ]
        for s in spans.calls()
    }
    assert sorted(steps.items()) == [(0, 1), (1, 3), (2, 4), (10, 2)]
    (summary,) = spans.summaries()
    assert summary.attributes["toolguard.trajectory.length"] == 4
