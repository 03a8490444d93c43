"""Calls the framework refuses after the guard's check, before the tool runs: LangChain's own
argument validation, a name the tool node has no tool of. They did not execute, so they are
``blocked`` in both modes (protocol section 4), never ``logged`` or ``allowed``, with the
framework's own answer for the model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import toolguard as tg
from conftest import PHONE, AddressBook, Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool, ToolException, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from opentelemetry.trace import StatusCode
from pydantic import BaseModel, field_validator

from toolguard_langchain import ToolCallGuard, ToolGuardMiddleware, declare_tool

MODES = [(g, r) for g in ("block", "log") for r in ("sync", "async")]


class Lookup(BaseModel):
    code: str

    @field_validator("code")
    @classmethod
    def upper_case(cls, value: str) -> str:
        # A rule the JSON Schema the guard checks cannot express: only LangChain refuses.
        if value != value.upper():
            raise ValueError("the code must be upper case")
        return value


class Ran:
    def __init__(self) -> None:
        self.codes: list[str] = []

    def tool(self, **options: Any) -> StructuredTool:
        def lookup(code: str) -> dict[str, str]:
            self.codes.append(code)
            return {"code": code}

        return StructuredTool.from_function(
            lookup, name="lookup", description="Look a code up.", args_schema=Lookup, **options
        )


def run(agent: Any, text: str, mode: str) -> dict[str, Any]:
    inputs = {"messages": [("user", text)]}
    out = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))
    return dict(out)


def answers(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def span_of(spans: Spans, call_id: str) -> Any:
    (span,) = [s for s in spans.calls() if s.attributes["gen_ai.tool.call.id"] == call_id]
    return span


def assert_blocked(spans: Spans, call_id: str, check: str) -> Any:
    span = span_of(spans, call_id)
    a = span.attributes
    assert a["toolguard.decision"] == "blocked"
    assert a["toolguard.valid"] is False
    assert a["toolguard.cause"] == "schema"
    assert a["toolguard.check"] == check
    assert list(a["toolguard.failed_checks"]) == [check]  # once, and no state.error_result
    assert span.status.status_code == StatusCode.ERROR
    return a


@pytest.mark.parametrize(("guard_mode", "mode"), MODES)
def test_arguments_only_langchain_refuses_are_blocked(
    guard_mode: str, mode: str, spans: Spans
) -> None:
    ran = Ran()
    lookup = ran.tool()
    guard = tg.Guard(mode=guard_mode, tracer_provider=spans.provider)
    declare_tool(guard, lookup)
    script = (
        turn(call("lookup", {"code": "abc"}, "v1")),
        turn(call("lookup", {"code": "ABC"}, "v2")),
        "Found ABC.",
    )
    agent = create_agent(scripted(*script), [lookup], middleware=[ToolGuardMiddleware(guard)])
    out = run(agent, "look abc up", mode)

    first = answers(out)[0]
    # LangChain's own answer reaches the model, as without the guard.
    assert first.status == "error"
    assert first.content.startswith("Error invoking tool 'lookup'")
    assert ran.codes == ["ABC"]  # the refused call never ran
    a = assert_blocked(spans, "v1", "schema.args")
    assert a["toolguard.message"] == (
        "LangChain refused the arguments of 'lookup' (code: value_error); the tool did not run"
    )
    assert span_of(spans, "v2").attributes["toolguard.decision"] == "allowed"
    (summary,) = spans.summaries()
    assert summary.attributes["toolguard.trajectory.length"] == 2
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_log_mode_schema_failure_the_framework_refuses_is_blocked_once(
    mode: str, book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(mode="log", state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    script = (
        turn(call("search_contacts", {"phone": 5}, "s1")),  # the guard logs it, LangChain refuses
        turn(call("search_contacts", {}, "s2")),
        "Gave up.",
    )
    agent = create_agent(scripted(*script), book.tools, middleware=[ToolGuardMiddleware(guard)])
    out = run(agent, "find her", mode)

    assert [m.content.startswith("Error invoking tool") for m in answers(out)] == [True, True]
    for call_id in ("s1", "s2"):
        a = assert_blocked(spans, call_id, "schema.args")
        # The guard's own failure is the one named: it said it first.
        assert not a["toolguard.message"].startswith("LangChain refused")
    (summary,) = spans.summaries()
    assert summary.attributes["toolguard.trajectory.length"] == 2
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 1


@pytest.mark.parametrize("guard_mode", ["block", "log"])
def test_tool_handle_validation_error_answer_is_blocked(guard_mode: str, spans: Spans) -> None:
    ran = Ran()
    lookup = ran.tool(handle_validation_error=True)  # the tool answers the refusal itself
    guard = tg.Guard(mode=guard_mode, tracer_provider=spans.provider)
    declare_tool(guard, lookup)
    script = (turn(call("lookup", {"code": "abc"}, "h1")), "No.")
    agent = create_agent(scripted(*script), [lookup], middleware=[ToolGuardMiddleware(guard)])
    out = run(agent, "look abc up", "sync")

    assert answers(out)[0].status == "error"
    assert ran.codes == []
    assert_blocked(spans, "h1", "schema.args")


@pytest.mark.parametrize(("guard_mode", "mode"), MODES)
def test_refusal_raised_through_the_tool_node_is_blocked(
    guard_mode: str, mode: str, spans: Spans
) -> None:
    ran = Ran()
    lookup = ran.tool()
    guard = tg.Guard(mode=guard_mode, tracer_provider=spans.provider)
    declare_tool(guard, lookup)
    guarded = ToolCallGuard(guard)
    node = ToolNode(
        [lookup],
        handle_tool_errors=False,  # LangGraph's ToolInvocationError leaves the node
        wrap_tool_call=guarded.wrap_tool_call,
        awrap_tool_call=guarded.awrap_tool_call,
    )
    builder = StateGraph(MessagesState)
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    inputs = {"messages": [turn(call("lookup", {"code": "abc"}, "n1"))]}
    with guard.trajectory("node") as traj, pytest.raises(Exception, match="Error invoking tool"):
        graph.invoke(inputs) if mode == "sync" else asyncio.run(graph.ainvoke(inputs))

    assert ran.codes == []
    assert_blocked(spans, "n1", "schema.args")
    assert (traj.length, traj.first_error_depth) == (1, 1)


@pytest.mark.parametrize("guard_mode", ["block", "log"])
def test_validation_error_raised_by_the_tool_body_is_its_own_failure(
    guard_mode: str, spans: Spans
) -> None:
    @tool
    def parse(text: str) -> str:
        """Parse a code."""
        Lookup(code=text)  # raises in the tool's own body: the tool ran
        return text

    guard = tg.Guard(mode=guard_mode, tracer_provider=spans.provider)
    guarded = ToolCallGuard(guard)
    node = ToolNode([parse], handle_tool_errors=True, wrap_tool_call=guarded.wrap_tool_call)
    builder = StateGraph(MessagesState)
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    with guard.trajectory("node"):
        out = builder.compile().invoke({"messages": [turn(call("parse", {"text": "abc"}, "p1"))]})

    assert out["messages"][-1].status == "error"
    a = span_of(spans, "p1").attributes
    assert a["toolguard.decision"] == "allowed"  # it executed; the environment failed it
    assert a["toolguard.check"] == "state.error_result"


@pytest.mark.parametrize(("guard_mode", "mode"), MODES)
def test_a_tool_the_guard_knows_but_the_agent_lacks_is_blocked(
    guard_mode: str, mode: str, book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(mode=guard_mode, state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)  # declares search_contacts too, which this agent does not have
    script = (turn(call("search_contacts", {"phone": PHONE}, "k1")), "Sorry.")
    agent = create_agent(
        scripted(*script), [book.remove_contact], middleware=[ToolGuardMiddleware(guard)]
    )
    out = run(agent, "find her", mode)

    (answer,) = answers(out)
    # LangGraph's own answer (the prefix the adapter recognises is pinned here).
    assert answer.content.startswith("Error: search_contacts is not a valid tool")
    assert_blocked(spans, "k1", "schema.tool")


def test_a_tool_an_inner_middleware_supplies_is_not_a_refusal(
    book: AddressBook, spans: Spans
) -> None:
    @tool
    def dynamic(phone: str) -> str:
        """Registered by a middleware at run time."""
        raise ToolException("the directory is down")

    dynamic.handle_tool_error = True

    class Supplies(AgentMiddleware[Any, Any]):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            if request.tool is None and request.tool_call["name"] == "search_contacts":
                request = request.override(tool=dynamic)
            return handler(request)

    guard = tg.Guard(mode="log", state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    script = (turn(call("search_contacts", {"phone": PHONE}, "d1")), "Down.")
    agent = create_agent(
        scripted(*script),
        [book.remove_contact],
        middleware=[ToolGuardMiddleware(guard), Supplies()],
    )
    out = run(agent, "find her", "sync")

    (answer,) = answers(out)
    assert answer.status == "error" and answer.content == "the directory is down"
    a = span_of(spans, "d1").attributes
    assert a["toolguard.decision"] == "allowed"  # it ran, and failed
    assert a["toolguard.check"] == "state.error_result"
