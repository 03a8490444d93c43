"""Log mode, and the calls the framework refuses itself (unknown tool, malformed
arguments): counted as steps of the trajectory."""

from __future__ import annotations

import asyncio

import pytest
import toolguard as tg
from conftest import PAPER_SCRIPT, PHONE, AddressBook, Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage

from toolguard_langchain import ToolGuardMiddleware


def tool_messages(out: dict[str, object]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_log_mode_runs_the_invalid_call_and_records_it(
    mode: str, book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(mode="log", state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    agent = create_agent(
        scripted(*PAPER_SCRIPT), book.tools, middleware=[ToolGuardMiddleware(guard)]
    )
    inputs = {"messages": [("user", f"Remove the contact with phone {PHONE}")]}
    out = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))

    first = tool_messages(out)[0]
    # The tool ran and the model got the tool's own answer, not the guard's.
    assert first.content == '{"error": "no contact +1-555-0199"}' and first.status == "success"
    span = next(s for s in spans.calls() if s.attributes["gen_ai.tool.call.id"] == "c1")
    assert span.attributes["toolguard.decision"] == "logged"
    assert span.attributes["toolguard.cause"] == "dependency"
    assert list(span.attributes["toolguard.failed_checks"]) == [
        "dependency.contact_id",
        "state.error_result",
    ]
    (summary,) = spans.summaries()
    assert summary.attributes["toolguard.trajectory.length"] == 3
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 1
    assert book.contacts == {}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_unknown_tool_refused_by_the_framework_is_a_step(
    mode: str, book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    script = (
        turn(call("delete_everything", {}, "u1"), call("search_contacts", {"phone": PHONE}, "u2")),
        "Sorry.",
    )
    agent = create_agent(scripted(*script), book.tools, middleware=[ToolGuardMiddleware(guard)])
    inputs = {"messages": [("user", "clean up")]}
    out = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))

    refused = tool_messages(out)[0]
    # LangChain's own answer reaches the model unchanged.
    assert refused.content.startswith("Error: delete_everything is not a valid tool")
    assert refused.status == "error"
    assert spans.steps() == {
        "u1": (1, "delete_everything", "blocked", "schema"),
        "u2": (2, "search_contacts", "allowed", None),
    }
    span = next(s for s in spans.calls() if s.attributes["gen_ai.tool.call.id"] == "u1")
    assert span.attributes["toolguard.check"] == "schema.tool"
    (summary,) = spans.summaries()
    assert summary.attributes["toolguard.trajectory.length"] == 2
    assert summary.attributes["toolguard.trajectory.first_error.cause"] == "schema"


def malformed(name: str, id: str) -> dict[str, object]:
    return {
        "name": name,
        "args": '{"contact_id": ',
        "id": id,
        "error": "bad JSON",
        "type": "invalid_tool_call",
    }


def test_malformed_arguments_refused_by_the_framework_are_steps(
    book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    script = (
        # A turn with a call the provider could not parse next to a good one ...
        AIMessage(
            content="",
            tool_calls=[call("search_contacts", {"phone": PHONE}, "m1")],
            invalid_tool_calls=[malformed("remove_contact", "m2")],
        ),
        # ... and a last turn with nothing but one: it never reaches a tool node.
        AIMessage(content="", invalid_tool_calls=[malformed("remove_contact", "m3")]),
    )
    agent = create_agent(scripted(*script), book.tools, middleware=[ToolGuardMiddleware(guard)])
    agent.invoke({"messages": [("user", "remove it")]})

    assert spans.steps() == {
        "m1": (1, "search_contacts", "allowed", None),
        "m2": (2, "remove_contact", "blocked", "schema"),
        "m3": (3, "remove_contact", "blocked", "schema"),
    }
    assert {
        s.attributes["toolguard.check"]
        for s in spans.calls()
        if s.attributes.get("toolguard.cause")
    } == {"schema.json"}
    (summary,) = spans.summaries()
    assert summary.attributes["toolguard.trajectory.length"] == 3
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 2


def test_undeclared_tools_are_declared_from_their_schema(book: AddressBook, spans: Spans) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)  # nothing declared
    script = (
        turn(call("search_contacts", {"phone": 5}, "s1")),  # a number: the schema says string
        turn(call("search_contacts", {"phone": PHONE}, "s2")),
        "Found Alice.",
    )
    agent = create_agent(scripted(*script), book.tools, middleware=[ToolGuardMiddleware(guard)])
    out = agent.invoke({"messages": [("user", "find her")]})

    first = tool_messages(out)[0]
    assert first.content.startswith("Error: the call to `search_contacts` was rejected (schema).")
    assert "search_contacts" in guard.tool_names and "remove_contact" not in guard.tool_names
    assert spans.steps()["s1"] == (1, "search_contacts", "blocked", "schema")
    assert spans.steps()["s2"] == (2, "search_contacts", "allowed", None)


def test_declare_tools_off_rejects_tools_the_guard_does_not_know(
    book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    guard.declare(
        "search_contacts",
        json_schema={
            "type": "object",
            "properties": {"phone": {"type": "string"}},
            "required": ["phone"],
        },
    )
    script = (turn(call("remove_contact", {"contact_id": "id_8923"}, "r1")), "Could not.")
    agent = create_agent(
        scripted(*script), book.tools, middleware=[ToolGuardMiddleware(guard, declare_tools=False)]
    )
    out = agent.invoke({"messages": [("user", "remove id_8923")]})

    (answer,) = tool_messages(out)
    assert answer.content.startswith("Error: the call to `remove_contact` was rejected (schema).")
    assert book.contacts  # it never ran
    assert spans.steps()["r1"] == (1, "remove_contact", "blocked", "schema")
