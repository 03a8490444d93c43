"""A stream the app stops reading between two nodes. LangGraph tells no middleware hook; the
only sign is ``on_chain_error(GeneratorExit)`` on the root run's callbacks, the same sign
as a stream left at its ``__interrupt__`` chunk, and a run with a checkpointer continues
from its last checkpoint either way (``stream(None, config)`` / ``Command(resume=...)``):
so the trajectory stays open for that run, which the tests below hold the adapter to."""

from __future__ import annotations

from typing import Any

import toolguard as tg
from conftest import PAPER_SCRIPT, PHONE, AddressBook, Spans, scripted
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from toolguard_langchain import ToolGuardMiddleware

INPUTS = {"messages": [("user", f"Remove the contact with phone {PHONE}")]}


def one_trajectory(spans: Spans) -> Any:
    """The run's one summary, with every call span in its trajectory."""
    (summary,) = spans.summaries()
    traj_id = summary.attributes["toolguard.trajectory.id"]
    assert {s.attributes["toolguard.trajectory.id"] for s in spans.calls()} == {traj_id}
    return summary.attributes


def test_an_abandoned_stream_resumed_from_its_checkpoint_continues_its_trajectory(
    book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    agent = create_agent(
        scripted(*PAPER_SCRIPT),
        book.tools,
        middleware=[ToolGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    stream = agent.stream(INPUTS, config=config, stream_mode="updates")
    nodes = [next(iter(next(stream))) for _ in range(3)]
    stream.close()  # left after the first tool node
    assert nodes[-1] == "tools"
    assert spans.summaries() == []

    for _ in agent.stream(None, config=config, stream_mode="updates"):
        pass  # the same run, from its last checkpoint

    summary = one_trajectory(spans)
    assert summary["toolguard.trajectory.length"] == 3
    assert summary["toolguard.trajectory.first_error_depth"] == 1
    assert spans.steps() == {
        "c1": (1, "remove_contact", "blocked", "dependency"),
        "c2": (2, "search_contacts", "allowed", None),
        "c3": (3, "remove_contact", "allowed", None),
    }


def test_a_stream_left_at_its_interrupt_keeps_its_trajectory_for_the_resumed_run(
    book: AddressBook, spans: Spans
) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    agent = create_agent(
        scripted(*PAPER_SCRIPT),
        book.tools,
        middleware=[
            ToolGuardMiddleware(guard),
            HumanInTheLoopMiddleware(interrupt_on={"remove_contact": True}),
        ],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t2"}}
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    inputs: Any = INPUTS
    pauses = 0
    while True:
        paused = False
        for chunk in agent.stream(inputs, config=config, stream_mode="updates"):
            if "__interrupt__" in chunk:
                paused = True
                break  # the usual loop: stop reading at the interrupt, ask the human
        if not paused:
            break
        pauses += 1
        assert spans.summaries() == []  # paused, not ended
        inputs = approve

    assert pauses == 2  # both remove_contact calls
    summary = one_trajectory(spans)
    assert summary["toolguard.trajectory.length"] == 3
    assert summary["toolguard.trajectory.first_error_depth"] == 1
    assert book.contacts == {}


def test_a_stream_read_inside_a_trajectory_of_its_own_ends_with_the_block(
    book: AddressBook, spans: Spans
) -> None:
    # The README's way to have an abandoned stream's summary at once.
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    agent = create_agent(
        scripted(*PAPER_SCRIPT), book.tools, middleware=[ToolGuardMiddleware(guard)]
    )
    with guard.trajectory("task-1") as traj:
        for chunk in agent.stream(INPUTS, stream_mode="updates"):
            if "tools" in chunk:
                break  # the app stops reading after the first tool node

    summary = one_trajectory(spans)
    assert summary["toolguard.trajectory.id"] == traj.id
    assert summary["toolguard.trajectory.length"] == 1
    assert summary["toolguard.trajectory.first_error_depth"] == 1
