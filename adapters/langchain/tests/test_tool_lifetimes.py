"""A long-lived middleware serving agents whose tools are built per request (closing over the
request's user or session): once a request is done, nothing the guard keeps holds its tools,
so they are freed. Counted with weak references and the garbage collector, never timed."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest
import toolguard as tg
from conftest import Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel

from toolguard_langchain import ToolGuardMiddleware


class NoArgs(BaseModel):
    pass


class Session(BaseTool):
    """A BaseTool subclass holding per-request state."""

    name: str = "session"
    description: str = "The session's id."
    args_schema: type[BaseModel] = NoArgs
    user: str = ""

    def _run(self, **kwargs: Any) -> str:
        return f"session of {self.user}"

    async def _arun(self, **kwargs: Any) -> str:
        return f"session of {self.user}"


def request_tools(user: str) -> list[BaseTool]:
    context = bytearray(10_000)  # what a real request's tool closes over

    @tool
    def whoami() -> str:
        """Who is signed in."""
        return f"{user} ({len(context)})"

    return [whoami, Session(user=user)]


def serve(middleware: ToolGuardMiddleware, user: str, mode: str) -> list[weakref.ref[Any]]:
    tools = request_tools(user)
    script = (turn(call("whoami", {}, f"{user}-1"), call("session", {}, f"{user}-2")), "Hi.")
    agent = create_agent(scripted(*script), tools, middleware=[middleware])
    inputs = {"messages": [("user", "Who am I?")]}
    out = asyncio.run(agent.ainvoke(inputs)) if mode == "async" else agent.invoke(inputs)
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in answers] == ["success", "success"]
    assert answers[1].content == f"session of {user}"
    return [weakref.ref(t) for t in tools]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_tools_built_per_request_are_freed(mode: str, spans: Spans) -> None:
    middleware = ToolGuardMiddleware(tg.Guard(tracer_provider=spans.provider))
    refs = [ref for i in range(20) for ref in serve(middleware, f"u{i}", mode)]
    gc.collect()

    assert [r for r in refs if r() is not None] == []
    assert len(middleware.calls.copies) == 0


def test_tools_kept_alive_elsewhere_keep_a_bounded_number_of_copies(spans: Spans) -> None:
    """Tools the app itself keeps (a registry of them): their copies stay, up to a bound."""
    middleware = ToolGuardMiddleware(tg.Guard(tracer_provider=spans.provider))
    middleware.calls.copies.most = 3
    kept = [request_tools(f"u{i}") for i in range(4)]
    for i, tools in enumerate(kept):
        script = (turn(call("whoami", {}, f"w{i}"), call("session", {}, f"s{i}")), "Hi.")
        agent = create_agent(scripted(*script), tools, middleware=[middleware])
        out = agent.invoke({"messages": [("user", "Who am I?")]})
        assert [m.status for m in out["messages"] if isinstance(m, ToolMessage)] == ["success"] * 2

    assert len(middleware.calls.copies) == 3
