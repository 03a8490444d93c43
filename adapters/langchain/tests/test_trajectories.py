"""Episode boundaries: one trajectory per agent run, or the user's own (given, current, or
found by the thread id); labels, outcome, and what the user typed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import toolguard as tg
from conftest import PAPER_SCRIPT, PHONE, AddressBook, Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from opentelemetry.sdk.trace import TracerProvider

from toolguard_langchain import ToolCallGuard, ToolGuardMiddleware, declare_tool

ASK = {"messages": [("user", f"Remove the contact with phone {PHONE}")]}


def summary_attributes(spans: Spans) -> list[dict[str, object]]:
    return [dict(s.attributes or {}) for s in spans.summaries()]


def test_each_run_is_its_own_trajectory(spans: Spans) -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    guard = tg.Guard(tracer_provider=spans.provider)
    script = [turn(call("ping", {}, f"p{i}")) if i % 2 == 0 else "done" for i in range(4)]
    middleware = ToolGuardMiddleware(guard, labels={"model": "m"}, success=lambda s: True)
    agent = create_agent(scripted(*script), [ping], middleware=[middleware])
    agent.invoke({"messages": [("user", "one")]})
    agent.invoke({"messages": [("user", "two")]})

    first, second = summary_attributes(spans)
    assert first["toolguard.trajectory.id"] != second["toolguard.trajectory.id"]
    for summary in (first, second):
        assert summary["toolguard.trajectory.length"] == 1
        assert summary["toolguard.trajectory.success"] is True
        assert summary["toolguard.label.model"] == "m"
    assert len(guard.trajectories) == 0  # nothing left open


def test_a_trajectory_current_around_invoke_is_used(book: AddressBook, spans: Spans) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    agent = create_agent(
        scripted(*PAPER_SCRIPT), book.tools, middleware=[ToolGuardMiddleware(guard)]
    )
    with guard.trajectory("task-7", labels={"method": "react"}) as traj:
        agent.invoke(ASK)
        traj.success = True

    assert (traj.length, traj.first_error_depth) == (3, 1)
    (summary,) = summary_attributes(spans)  # the middleware opened none of its own
    assert summary["toolguard.trajectory.id"] == "task-7"
    assert summary["toolguard.trajectory.success"] is True
    assert {s.attributes["toolguard.trajectory.id"] for s in spans.calls()} == {"task-7"}


def test_a_given_trajectory_is_used_and_left_open(book: AddressBook, spans: Spans) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    traj = guard.trajectory("given").start()
    agent = create_agent(
        scripted(*PAPER_SCRIPT),
        book.tools,
        middleware=[ToolGuardMiddleware(guard, trajectory=traj)],
    )
    agent.invoke(ASK)
    assert not traj.ended and spans.summaries() == []
    traj.end()
    assert (traj.length, traj.first_error_depth) == (3, 1)


def test_a_conversation_keyed_by_thread_id_spans_several_runs(
    book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    agent = create_agent(
        scripted(*PAPER_SCRIPT[:2], "Found her.", PAPER_SCRIPT[2], "Removed."),
        book.tools,
        middleware=[ToolGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "thread-7"}}
    conversation = guard.trajectory("conversation-7", key="thread-7").start()
    agent.invoke(ASK, config)
    agent.invoke({"messages": [("user", "yes, remove her")]}, config)

    assert not conversation.ended
    assert (conversation.length, conversation.first_error_depth) == (3, 1)
    conversation.end()
    (summary,) = summary_attributes(spans)
    assert summary["toolguard.trajectory.id"] == "conversation-7"


def test_a_run_that_failed_is_ended_and_the_next_run_of_its_thread_is_its_own(spans: Spans) -> None:
    calls = 0

    @tool
    def flaky() -> str:
        """Fails the first time."""
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("down")
        return "up"

    guard = tg.Guard(tracer_provider=spans.provider)
    agent = create_agent(
        scripted(turn(call("flaky", {}, "f1")), turn(call("flaky", {}, "f2")), "ok"),
        [flaky],
        middleware=[ToolGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    with contextlib.suppress(RuntimeError):
        agent.invoke({"messages": [("user", "try")]}, config)
    # after_agent never ran: the tool's exception ended it (test_failed_runs.py)
    assert len(spans.summaries()) == 1 and len(guard.trajectories) == 0
    agent.invoke({"messages": [("user", "again")]}, config)

    failed, retried = summary_attributes(spans)
    assert failed["toolguard.trajectory.length"] == 1
    assert failed["toolguard.trajectory.first_error.cause"] == "state_consistency"
    assert "toolguard.trajectory.success" not in failed
    assert failed["gen_ai.conversation.id"] == "t"
    assert retried["toolguard.trajectory.length"] == 1
    assert retried["toolguard.trajectory.first_error_depth"] == 2
    assert len(guard.trajectories) == 0


def test_what_the_user_typed_grounds_arguments(spans: Spans) -> None:
    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        return "sent"

    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, send_email, grounded=["to"])
    script = (
        turn(call("send_email", {"to": "john.doe@example.com", "body": "hi"}, "e1")),
        turn(call("send_email", {"to": "ann@example.org", "body": "hi"}, "e2")),
        "Sent.",
    )
    agent = create_agent(scripted(*script), [send_email], middleware=[ToolGuardMiddleware(guard)])
    agent.invoke({"messages": [("user", "Say hi to ann@example.org")]})

    assert spans.steps() == {
        "e1": (1, "send_email", "blocked", "information"),
        "e2": (2, "send_email", "allowed", None),
    }


def test_a_guard_tool_function_is_checked_once(spans: Spans) -> None:
    contacts = {"id_8923": PHONE}
    guard = tg.Guard(state=contacts, tracer_provider=spans.provider)

    @guard.tool(produces={"$": "contact_id"})
    def find(phone: str) -> str:
        """The id of the contact with this phone number."""
        return next(cid for cid, p in contacts.items() if p == phone)

    @guard.tool(refs={"contact_id": "contact_id"})
    def remove(contact_id: str) -> str:
        """Remove a contact by id."""
        del contacts[contact_id]
        return "removed"

    script = (
        turn(call("remove", {"contact_id": PHONE}, "g1")),
        turn(call("find", {"phone": PHONE}, "g2")),
        turn(call("remove", {"contact_id": "id_8923"}, "g3")),
        "Done.",
    )
    # create_agent makes LangChain tools of the guarded functions themselves.
    agent = create_agent(scripted(*script), [find, remove], middleware=[ToolGuardMiddleware(guard)])
    out = agent.invoke(ASK)

    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answers[0].content.startswith("Error: the call to `remove` was rejected (dependency).")
    assert [a.content for a in answers[1:]] == ["id_8923", "removed"]
    assert len(spans.calls()) == 3  # one span per call: the functions' own wrappers stood aside
    assert contacts == {}


def test_an_interrupted_call_is_cancelled_and_keeps_its_step_when_resumed(
    span_file: tuple[TracerProvider, Path],
) -> None:
    provider, path = span_file

    @tool
    def wire(amount: int) -> str:
        """Wire money, once a human approves."""
        if interrupt(f"approve {amount}?") != "yes":
            return "not approved"
        return "wired"

    guard = tg.Guard(tracer_provider=provider)
    agent = create_agent(
        scripted(turn(call("wire", {"amount": 5}, "w1")), "Wired."),
        [wire],
        middleware=[ToolGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "w"}}
    paused = agent.invoke({"messages": [("user", "wire 5")]}, config)
    assert "__interrupt__" in paused
    done = agent.invoke(Command(resume="yes"), config)
    assert done["messages"][-1].content == "Wired."

    provider.force_flush()
    records, _ = tg.read_records([str(path)])
    (record,) = records
    # The paused attempt (cancelled) and the resumed one share the call's step: T = 1.
    assert (record.length, record.fed) == (1, 2)
    assert not record.incomplete and not record.disagreements
    assert [(a["toolguard.step"], a["toolguard.decision"]) for a in call_spans(path)] == [
        ("1", "cancelled"),
        ("1", "allowed"),
    ]


def call_spans(path: Path) -> list[dict[str, str]]:
    """The call spans' attributes in an OTLP JSON Lines file, values as text."""
    spans = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attributes = {
                        a["key"]: str(next(iter(a["value"].values())))
                        for a in span.get("attributes", [])
                    }
                    if "toolguard.step" in attributes:
                        spans.append(attributes)
    return spans


def test_without_langchain_the_import_error_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['langchain'] = None\n"
        "import toolguard_langchain\n"
        "try:\n"
        "    toolguard_langchain.ToolGuardMiddleware\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "langchain>=1.0,<2" in done.stdout
    assert "pip install -e . -e adapters/langchain" in done.stdout


def test_a_sub_agent_inside_a_tool_adds_no_steps(spans: Spans) -> None:
    guard = tg.Guard(tracer_provider=spans.provider)
    middleware = ToolGuardMiddleware(guard)

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    helper = create_agent(
        scripted(
            turn(call("lookup", {"key": "a"}, "in1"), call("lookup", {"key": "b"}, "in2")), "ok"
        ),
        [lookup],
        middleware=[middleware],
    )

    @tool
    def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        return str(helper.invoke({"messages": [("user", question)]})["messages"][-1].content)

    agent = create_agent(
        scripted(turn(call("ask_helper", {"question": "a and b?"}, "out1")), "done"),
        [ask_helper],
        middleware=[middleware],
    )
    agent.invoke({"messages": [("user", "go")]})

    (summary,) = summary_attributes(spans)  # the helper's run opened no trajectory of its own
    assert summary["toolguard.trajectory.length"] == 1  # the agent emitted one call
    steps = spans.steps()
    assert steps["out1"] == (1, "ask_helper", "allowed", None)
    # The helper's calls are checked and traced, below the outer call, but are no steps.
    assert steps["in1"] == (None, "lookup", "allowed", None)
    assert steps["in2"] == (None, "lookup", "allowed", None)
    outer = next(s for s in spans.calls() if s.attributes["gen_ai.tool.call.id"] == "out1")
    inner = [s for s in spans.calls() if s.attributes["gen_ai.tool.call.id"] != "out1"]
    assert all(s.context.trace_id == outer.context.trace_id for s in inner)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_tool_call_guard_adds_no_step_to_the_graph_and_uses_the_callers_trajectory(
    mode: str, book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    plain = create_agent(scripted(*PAPER_SCRIPT), book.tools)
    agent = create_agent(scripted(*PAPER_SCRIPT), book.tools, middleware=[ToolCallGuard(guard)])
    assert set(agent.get_graph().nodes) == set(plain.get_graph().nodes)

    with guard.trajectory("task-1", labels={"method": "react"}) as traj:
        if mode == "sync":
            agent.invoke(ASK)
        else:
            asyncio.run(agent.ainvoke(ASK))
        traj.success = not book.contacts

    assert (traj.length, traj.first_error_depth, traj.success) == (3, 1, True)
    assert spans.steps()["c1"] == (1, "remove_contact", "blocked", "dependency")
    (summary,) = summary_attributes(spans)
    assert summary["toolguard.trajectory.id"] == "task-1"
