"""The paper's scenario through a real create_agent, sync and async: the first call deletes
a contact by phone number where an id belongs; the guard blocks it (dependency), the model
reads the guard's message as the tool result, searches, and deletes by id. T = 3, FED = 1,
and the span file says so."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import toolguard as tg
from conftest import PAPER_SCRIPT, PHONE, AddressBook, scripted
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from opentelemetry.sdk.trace import TracerProvider

from toolguard_langchain import ToolGuardMiddleware


def run(agent: object, inputs: dict[str, object], mode: str) -> dict[str, object]:
    if mode == "async":
        return asyncio.run(agent.ainvoke(inputs))  # type: ignore[attr-defined, no-any-return]
    return agent.invoke(inputs)  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_paper_scenario(
    mode: str, book: AddressBook, span_file: tuple[TracerProvider, Path]
) -> None:
    provider, path = span_file
    guard = tg.Guard(state=book.contacts, tracer_provider=provider)
    book.declare(guard)
    model = scripted(*PAPER_SCRIPT)
    middleware = ToolGuardMiddleware(
        guard,
        labels={"model": "scripted", "method": "react"},
        success=lambda state: "id_8923" not in book.contacts,
    )
    agent = create_agent(model, book.tools, middleware=[middleware])

    out = run(agent, {"messages": [("user", f"Remove the contact with phone {PHONE}")]}, mode)

    assert book.contacts == {}
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]  # type: ignore[attr-defined]
    first = answers[0]
    assert (first.tool_call_id, first.name, first.status) == ("c1", "remove_contact", "error")
    assert first.content.startswith(
        "Error: the call to `remove_contact` was rejected (dependency)."
    )
    # The model's next turn was given the guard's message as the result of its call.
    seen = [m for m in model.received[1] if isinstance(m, ToolMessage)]
    assert [m.content for m in seen] == [first.content]
    assert [a.status for a in answers[1:]] == ["success", "success"]

    provider.force_flush()
    records, _ = tg.read_records([str(path)])
    assert len(records) == 1
    record = records[0]
    assert (record.length, record.fed, record.first_error_cause) == (3, 1, "dependency")
    assert record.success is True and not record.incomplete and not record.disagreements
    assert record.labels == {"model": "scripted", "method": "react"}

    report = tg.build_report(records, by=["method"])
    group = report["groups"][0]
    assert group["labels"] == {"method": "react"}
    assert (group["n"], group["ter"], group["mean_fed"], group["auc_pec"]) == (1, 0.0, 1.0, 0.0)
    assert (group["rr"], group["rr_eligible"], group["causes"]["dependency"]) == (1.0, 1, 1)


def test_cli_report_reads_the_agents_spans(
    book: AddressBook, span_file: tuple[TracerProvider, Path]
) -> None:
    provider, path = span_file
    guard = tg.Guard(state=book.contacts, tracer_provider=provider)
    book.declare(guard)
    middleware = ToolGuardMiddleware(guard, labels={"method": "react"}, success=lambda s: True)
    agent = create_agent(scripted(*PAPER_SCRIPT), book.tools, middleware=[middleware])
    agent.invoke({"messages": [("user", f"Remove the contact with phone {PHONE}")]})
    provider.force_flush()

    done = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    overall = json.loads(done.stdout)["overall"]
    assert (overall["n"], overall["ter"], overall["mean_fed"]) == (1, 0.0, 1.0)
    assert overall["causes"]["dependency"] == 1 and overall["rr"] == 1.0
    assert overall["n_at_depth"] == [1, 1, 1]  # T = 3


def test_call_spans_hang_below_the_trajectory_span(book: AddressBook, spans) -> None:  # type: ignore[no-untyped-def]
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    agent = create_agent(
        scripted(*PAPER_SCRIPT), book.tools, middleware=[ToolGuardMiddleware(guard)]
    )
    agent.invoke({"messages": [("user", f"Remove the contact with phone {PHONE}")]})

    (summary,) = spans.summaries()
    calls = spans.calls()
    assert len(calls) == 3  # one span per call, the blocked one included
    assert all(c.parent is not None and c.parent.span_id == summary.context.span_id for c in calls)
    assert spans.steps() == {
        "c1": (1, "remove_contact", "blocked", "dependency"),
        "c2": (2, "search_contacts", "allowed", None),
        "c3": (3, "remove_contact", "allowed", None),
    }
