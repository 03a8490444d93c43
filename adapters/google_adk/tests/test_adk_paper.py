"""The paper's scenario through a real ADK Runner, ADK's own tracing on, spans to a file with
the official OTLP JSON file exporter, read back by the report and its command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import toolguard as tg
from conftest import Telemetry, answers, chat, scripted
from google.adk.agents import LlmAgent
from google.genai import types
from opentelemetry.exporter.otlp.json.file import FileSpanExporter

from toolguard_google_adk import ToolGuardPlugin

PHONE = "+1-555-0199"


def contact_chat(otel: Telemetry, contacts: dict[str, dict[str, str]], seen: list[Any]) -> Any:
    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [c for c in contacts.values() if c["phone"] == phone]

    def remove_contact(contact_id: str) -> dict[str, str]:
        """Remove a contact by its id."""
        del contacts[contact_id]
        return {"removed": contact_id}

    def after_rejection(results: list[types.FunctionResponse]) -> list[Any]:
        seen.extend(results)
        return [("search_contacts", {"phone": PHONE})]

    def delete_found(results: list[types.FunctionResponse]) -> list[Any]:
        (found,) = results
        assert found.response is not None
        return [("remove_contact", {"contact_id": found.response["result"][0]["id"]})]

    model = scripted([("remove_contact", {"contact_id": PHONE})], after_rejection, delete_found)
    exists = tg.Precondition(
        "contact_exists", lambda state, contact_id: contact_id in state, "the contact must exist"
    )
    plugin = ToolGuardPlugin(
        otel.guard(state=contacts),
        contracts={
            "search_contacts": {"produces": {"id": "contact_id"}},
            "remove_contact": {
                "refs": {"contact_id": "contact_id"},
                "invalidates": {"contact_id": "contact_id"},
                "preconditions": [exists],
            },
        },
        trajectory_id=lambda ctx: "paper",
        labels={"model": "scripted", "method": "react"},
        success=lambda ctx: not contacts,
    )
    agent = LlmAgent(name="contacts", model=model, tools=[search_contacts, remove_contact])
    return chat(agent, [plugin])


def test_papers_scenario_blocked_then_recovered(otel: Telemetry, tmp_path: Path, mode: str) -> None:
    path = tmp_path / "spans.jsonl"
    otel.also(FileSpanExporter(str(path)))
    contacts = {"id_8923": {"id": "id_8923", "name": "Alice", "phone": PHONE}}
    seen: list[Any] = []
    events = contact_chat(otel, contacts, seen).send(f"Delete the contact with phone {PHONE}", mode)

    assert events[-1].content is not None and events[-1].content.parts[0].text == "done"
    assert contacts == {}  # searched, then deleted by id
    # The model read the guard's message as the answer to its first call, in ADK's error shape.
    (first,) = seen
    assert first.response is not None
    assert first.response["error"].startswith(
        "Error: the call to `remove_contact` was rejected (dependency)"
    )
    assert len(answers(events)) == 3

    # One execute_tool span per call: ADK's own, carrying the guard's attributes.
    tool_spans = otel.tool_spans()
    assert len(tool_spans) == 3
    assert all(s.instrumentation_scope.name == "gcp.vertex.agent" for s in tool_spans)
    by_step = {s.attributes["toolguard.step"]: s.attributes for s in tool_spans}
    assert sorted(by_step) == [1, 2, 3]
    assert by_step[1]["toolguard.decision"] == "blocked"
    assert by_step[1]["toolguard.cause"] == "dependency"
    assert by_step[2]["gen_ai.tool.name"] == "search_contacts" and by_step[2]["toolguard.valid"]
    assert by_step[3]["toolguard.valid"]
    ids = [a["gen_ai.tool.call.id"] for a in by_step.values()]
    assert len(set(ids)) == 3 and all(i.startswith("adk-") for i in ids)

    records, _ = tg.read_records([str(path)])
    (record,) = records
    assert (record.trajectory_id, record.length, record.fed) == ("paper", 3, 1)
    assert record.first_error_cause == "dependency"
    assert record.success is True
    assert not record.incomplete and not record.disagreements
    report = tg.build_report(records, by=["method"])
    assert report["overall"]["ter"] == 0.0
    assert report["overall"]["rr"] == 1.0

    cli = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    overall = json.loads(cli.stdout)["overall"]
    assert (overall["n"], overall["ter"], overall["mean_fed"]) == (1, 0.0, 1.0)
    assert overall["causes"]["dependency"] == 1
