"""The paper's scenario through the real SDK: blocked, repaired, traced and reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agents.testing import assistant_message, function_call
from oa_contacts import CONTACT_ID, PHONE, address_book, contacts_agent
from oa_support import Episode, Telemetry, tool_outputs
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import toolguard as tg

PAPER = [
    [function_call("remove_contact", {"contact_id": PHONE}, call_id="c1")],  # a phone number!
    [function_call("search_contact", {"phone": PHONE}, call_id="c2")],
    [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c3")],
    [assistant_message("Alex is removed.")],
]


def test_paper_scenario_blocked_repaired_and_reported(episode: Episode, tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    contacts = address_book()
    guard = tg.Guard(state=contacts, tracer_provider=provider)
    agent, model = contacts_agent(guard, contacts, PAPER)
    labels = {"model": "scripted", "runner": episode.mode}

    result, traj = episode(guard, agent, f"Remove {PHONE}", "paper", labels=labels, success=True)

    assert result.final_output == "Alex is removed."
    model.assert_complete()
    assert contacts == {}
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (3, 1, "dependency")
    first, second, third = sorted(traj.verdicts, key=lambda v: v.step or 0)
    assert (first.call_id, first.decision, first.cause) == ("c1", "blocked", "dependency")
    assert (second.call_id, second.valid, third.call_id, third.valid) == ("c2", True, "c3", True)
    # The model read the guard's message as c1's result, then searched and used the id.
    rejected = tool_outputs(model, 2)["c1"]
    assert rejected.startswith("Error: the call to `remove_contact` was rejected (dependency).")
    assert "contact_id" in rejected
    assert CONTACT_ID in tool_outputs(model, 3)["c2"]
    assert CONTACT_ID in tool_outputs(model, 4)["c3"]
    provider.shutdown()

    records, stats = tg.read_records([str(path)])
    assert stats.spans == 4  # three calls and the summary
    [record] = records
    assert (record.trajectory_id, record.length, record.fed) == ("paper", 3, 1)
    assert (record.first_error_cause, record.success) == ("dependency", True)
    assert not record.incomplete and not record.disagreements
    [group] = tg.build_report(records, by=["runner"])["groups"]
    assert group["labels"] == {"runner": episode.mode}
    assert (group["n"], group["ter"], group["mean_fed"], group["rr"]) == (1, 0.0, 1.0, 1.0)
    assert group["causes"]["dependency"] == 1

    # The CLI reads the same file to the same numbers.
    cli = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    overall = json.loads(cli.stdout)["overall"]
    assert (overall["n"], overall["ter"], overall["mean_fed"]) == (1, 0.0, 1.0)


def test_one_span_per_call_below_the_summary(episode: Episode, otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent, _ = contacts_agent(guard, contacts, PAPER)

    episode(guard, agent, f"Remove {PHONE}", "spans", labels={"model": "scripted"}, success=True)

    calls = sorted(otel.call_spans(), key=lambda s: s.attributes["toolguard.step"])
    assert [s.name for s in calls] == [
        "execute_tool remove_contact",
        "execute_tool search_contact",
        "execute_tool remove_contact",
    ]
    assert [s.attributes["gen_ai.tool.call.id"] for s in calls] == ["c1", "c2", "c3"]
    assert [s.attributes["toolguard.decision"] for s in calls] == ["blocked", "allowed", "allowed"]
    summary = otel.summary()
    assert all(s.parent is not None and s.parent.span_id == summary.context.span_id for s in calls)
    assert summary.attributes["toolguard.trajectory.length"] == 3
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 1
    assert summary.attributes["toolguard.trajectory.success"] is True
    assert summary.attributes["toolguard.label.model"] == "scripted"
