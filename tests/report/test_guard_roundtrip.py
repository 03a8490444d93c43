"""A file written by the guard itself, read back by the report: the two sides of the contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import toolguard as tg
from toolguard._cli import main
from toolguard.report.read import read_records


def test_guard_spans_give_the_papers_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "guard.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    contacts = {"id_8923": "+1-555-0199"}
    guard = tg.Guard(state=contacts, tracer_provider=provider)

    @guard.tool
    def search_contact(phone: str) -> list[str]:
        return [cid for cid, p in contacts.items() if p == phone]

    @guard.tool(preconditions=[tg.Precondition(
        "contact_exists", lambda state, contact_id: contact_id in state, "the contact must exist"
    )])  # fmt: skip
    def remove_contact(contact_id: str) -> dict[str, bool]:
        contacts.pop(contact_id)
        return {"ok": True}

    search_contact("+1-555-0000")  # outside any trajectory: its span has no trajectory id
    seen = {}
    with tg.trajectory("A", labels={"model": "m", "task": "remove"},
                       tracer_provider=provider) as a:  # fmt: skip
        guard.call("remove_contact", {"contact_id": "+1-555-0199"})  # not an id: rejected
        remove_contact(search_contact("+1-555-0199")[0])
        a.success = True
    seen["A"] = (a.length, a.first_error_depth)
    contacts["id_1"] = "+1-555-0142"
    with tg.trajectory("B", labels={"model": "m", "task": "remove"},
                       tracer_provider=provider) as b:  # fmt: skip
        remove_contact(search_contact("+1-555-0142")[0])
        b.success = True
    seen["B"] = (b.length, b.first_error_depth)
    provider.shutdown()

    records, _ = read_records([str(path)])
    assert {r.trajectory_id: (r.length, r.fed) for r in records} == seen == {
        "A": (3, 1), "B": (2, 3)}  # fmt: skip
    assert all(not r.incomplete and not r.disagreements for r in records)
    assert records[0].first_error_cause == "precondition"
    assert records[0].labels == {"model": "m", "task": "remove"}

    assert main(["report", str(path), "--by", "model", "--format", "json"]) == 0
    g = json.loads(capsys.readouterr().out)["groups"][0]
    assert g["labels"] == {"model": "m"}
    assert (g["ter"], g["mean_fed"], g["auc_pec"], g["rr"], g["s"], g["final_success"]) == (
        0.5, 2.0, 0.5, 1.0, 1.0, 1.0)  # fmt: skip
    assert g["pec"] == [0.5, 0.5, 0.0] and g["causes"]["precondition"] == 1
