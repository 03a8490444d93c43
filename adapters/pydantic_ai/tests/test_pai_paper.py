"""The paper's scenario through a real Pydantic AI agent, its instrumentation on, spans to a
file with the official OTLP JSON file exporter, read back by the report."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toolguard as tg
from conftest import returns, scripted
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, InstrumentationSettings
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelRequest, ToolCallPart

from toolguard_pydantic_ai import ToolGuard

PHONE = "+1-555-0199"


def contact_agent(
    provider: TracerProvider, contacts: dict[str, dict[str, str]], seen: list[Any], run_id: str
) -> Agent[None, str]:
    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [c for c in contacts.values() if c["phone"] == phone]

    def remove_contact(contact_id: str) -> dict[str, str]:
        """Remove a contact by its id."""
        del contacts[contact_id]
        return {"removed": contact_id}

    def after_rejection(request: ModelRequest) -> list[ToolCallPart]:
        seen.append(returns(request)["c1"])
        return [ToolCallPart("search_contacts", {"phone": PHONE}, tool_call_id="c2")]

    def delete_found(request: ModelRequest) -> list[ToolCallPart]:
        found = returns(request)["c2"].content
        return [ToolCallPart("remove_contact", {"contact_id": found[0]["id"]}, tool_call_id="c3")]

    model = scripted(
        # A phone number where a contact id belongs.
        [ToolCallPart("remove_contact", {"contact_id": PHONE}, tool_call_id="c1")],
        after_rejection,
        delete_found,
    )
    guard = tg.Guard(state=contacts, tracer_provider=provider)
    exists = tg.Precondition(
        "contact_exists", lambda state, contact_id: contact_id in state, "the contact must exist"
    )
    return Agent(
        model,
        tools=[search_contacts, remove_contact],
        capabilities=[
            Instrumentation(settings=InstrumentationSettings(tracer_provider=provider)),
            ToolGuard(
                guard,
                contracts={
                    "search_contacts": {"produces": {"id": "contact_id"}},
                    "remove_contact": {
                        "refs": {"contact_id": "contact_id"},
                        "invalidates": {"contact_id": "contact_id"},
                        "preconditions": [exists],
                    },
                },
                trajectory_id=lambda ctx: run_id,
                labels={"model": "scripted", "method": "react"},
                success=lambda result: "id_8923" not in contacts,
            ),
        ],
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_papers_scenario_blocked_then_recovered(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    contacts = {"id_8923": {"id": "id_8923", "name": "Alice", "phone": PHONE}}
    seen: list[Any] = []
    agent = contact_agent(provider, contacts, seen, f"paper-{mode}")

    if mode == "sync":
        result = agent.run_sync(f"Delete the contact with phone {PHONE}")
    else:
        result = asyncio.run(agent.run(f"Delete the contact with phone {PHONE}"))
    provider.shutdown()

    assert result.output == "done"
    assert contacts == {}  # searched, then deleted by id
    # The model read the guard's message as the answer to its first call: a failed tool
    # return (the provider's error channel), not a retry.
    (first,) = seen
    assert first.outcome == "failed"
    assert first.content.startswith("Error: the call to `remove_contact` was rejected (dependency)")

    # One execute_tool span per call, Pydantic AI's own, carrying the guard's attributes.
    tool_spans = [s for s in memory.get_finished_spans() if s.name.startswith("execute_tool ")]
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in tool_spans) == ["c1", "c2", "c3"]
    by_id = {s.attributes["gen_ai.tool.call.id"]: s.attributes for s in tool_spans}
    assert [by_id[c]["toolguard.step"] for c in ("c1", "c2", "c3")] == [1, 2, 3]
    assert by_id["c1"]["toolguard.decision"] == "blocked"
    assert by_id["c1"]["toolguard.cause"] == "dependency"
    assert by_id["c2"]["toolguard.valid"] and by_id["c3"]["toolguard.valid"]
    assert all(s.instrumentation_scope.name == "pydantic-ai" for s in tool_spans)

    records, _ = tg.read_records([str(path)])
    (record,) = records
    assert (record.trajectory_id, record.length, record.fed) == (f"paper-{mode}", 3, 1)
    assert record.first_error_cause == "dependency"
    assert record.success is True
    assert not record.incomplete and not record.disagreements
    report = tg.build_report(records, by=["method"])
    assert report["overall"]["ter"] == 0.0
    assert report["overall"]["rr"] == 1.0
    assert report["overall"]["causes"]["dependency"] == 1

    cli = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    overall = json.loads(cli.stdout)["overall"]
    assert (overall["n"], overall["ter"], overall["mean_fed"]) == (1, 0.0, 1.0)
    assert overall["causes"]["dependency"] == 1
