"""The paper's scenario through a real FunctionAgent, spans to a file with the official OTLP
JSON file exporter, read back by the report and its command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toolguard as tg
from conftest import run, scripted
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import ChatMessage
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolguard_llama_index import guard_agent

PHONE = "+1-555-0199"


@pytest.mark.parametrize("kind", ["sync tools", "async tools"])
def test_papers_scenario_blocked_then_recovered(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    contacts = {"id_8923": {"id": "id_8923", "name": "Alice", "phone": PHONE}}
    seen: list[ChatMessage] = []

    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [c for c in contacts.values() if c["phone"] == phone]

    def remove_contact(contact_id: str) -> dict[str, str]:
        """Remove a contact by its id."""
        del contacts[contact_id]
        return {"removed": contact_id}

    async def asearch_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return search_contacts(phone)

    async def aremove_contact(contact_id: str) -> dict[str, str]:
        """Remove a contact by its id."""
        return remove_contact(contact_id)

    if kind == "async tools":
        asearch_contacts.__name__, aremove_contact.__name__ = "search_contacts", "remove_contact"
        tools: list[Any] = [asearch_contacts, aremove_contact]
    else:
        tools = [search_contacts, remove_contact]

    def after_rejection(answers: list[ChatMessage]) -> list[Any]:
        seen.extend(answers)
        return [("search_contacts", {"phone": PHONE})]

    model = scripted(
        [("remove_contact", {"contact_id": PHONE})],  # a phone number where an id belongs
        after_rejection,
        [("remove_contact", {"contact_id": "id_8923"})],  # the id the search returned
    )
    exists = tg.Precondition(
        "contact_exists", lambda state, contact_id: contact_id in state, "the contact must exist"
    )
    agent = guard_agent(
        FunctionAgent(tools=tools, llm=model),
        tg.Guard(state=contacts, tracer_provider=provider),
        contracts={
            "search_contacts": {"produces": {"id": "contact_id"}},
            "remove_contact": {
                "refs": {"contact_id": "contact_id"},
                "invalidates": {"contact_id": "contact_id"},
                "preconditions": [exists],
            },
        },
        trajectory_id=lambda: "paper",
        labels={"model": "scripted", "method": "react"},
        success=lambda result: not contacts,
    )
    result = run(agent, f"Delete the contact with phone {PHONE}")
    provider.shutdown()

    assert str(result) == "done"
    assert contacts == {}  # searched, then deleted by id
    (first,) = seen  # the guard's message, as LlamaIndex's error output for the call
    assert str(first.content).startswith(
        "Error: the call to `remove_contact` was rejected (dependency)"
    )

    tool_spans = [s for s in memory.get_finished_spans() if s.name.startswith("execute_tool ")]
    by_step = {s.attributes["toolguard.step"]: s.attributes for s in tool_spans}
    assert sorted(by_step) == [1, 2, 3]
    assert [by_step[i]["gen_ai.tool.call.id"] for i in (1, 2, 3)] == ["t0-0", "t1-0", "t2-0"]
    assert by_step[1]["toolguard.decision"] == "blocked"
    assert by_step[1]["toolguard.cause"] == "dependency"
    assert by_step[2]["toolguard.valid"] and by_step[3]["toolguard.valid"]

    records, _ = tg.read_records([str(path)])
    (record,) = records
    assert (record.trajectory_id, record.length, record.fed) == ("paper", 3, 1)
    assert record.first_error_cause == "dependency"
    assert record.success is True
    assert not record.incomplete and not record.disagreements
    cli = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    overall = json.loads(cli.stdout)["overall"]
    assert (overall["n"], overall["ter"], overall["mean_fed"], overall["rr"]) == (1, 0.0, 1.0, 1.0)
    assert overall["causes"]["dependency"] == 1
