"""Verification is not execution: a trajectory with verify_plan calls (and dry runs on a fork)
reads to the same report figures as the same trajectory without them.

The guard writes OTLP JSON Lines with the official file exporter and the report reads them back
(toolguard/report/collect.py finds call spans by toolguard.trajectory.id and toolguard.step:
verification spans carry neither toolguard.step nor toolguard.trajectory.length).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import toolguard as tg
from toolguard.report.read import read_records


class Shelf:
    def __init__(self) -> None:
        self.books = {"b1": "Dune", "b2": "Emma"}

    def find(self, title: str) -> list[dict[str, str]]:
        return [{"id": k, "title": v} for k, v in self.books.items() if v == title]

    def lend(self, book_id: str) -> dict[str, str]:
        if book_id not in self.books:
            raise KeyError(f"no book {book_id}")
        return {"lent": self.books.pop(book_id)}


def run(path: Path, verify: bool) -> list[Any]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    shelf = Shelf()
    guard = tg.Guard(state=shelf, dry_run=True, tracer_provider=provider)
    guard.proxy(shelf, {
        "find": tg.ToolSpec(produces={"id": "book_id"}),
        "lend": tg.ToolSpec(refs={"book_id": "book_id"}, invalidates={"book_id": "book_id"}),
    })  # fmt: skip
    plan = [
        tg.PlanStep("find", {"title": "Dune"}),
        tg.PlanStep("lend", {"book_id": tg.StepRef(0, "0.id")}),
        tg.PlanStep("lend", {"book_id": tg.StepRef(0, "0.id")}),  # fails: stale
    ]
    verdicts = []
    for task, method in (("t1", "react"), ("t2", "dual")):
        labels = {"method": method, "task": task}
        shelf.books = {"b1": "Dune", "b2": "Emma"}  # each task starts from the same shelf
        with tg.trajectory(task, labels=labels, tracer_provider=provider) as traj:
            if verify:
                verdicts.append(guard.verify_plan(plan))
                verdicts.append(guard.verify_plan(plan[:2]))
            guard.call("lend", {"book_id": "Dune"})  # a title, not an id: dependency
            found = guard.call("find", {"title": "Dune"})
            if verify:
                verdicts.append(guard.verify_plan(plan[1:], dry_run=False))
            guard.call("lend", {"book_id": found[0]["id"]} if found else {"book_id": "b1"})
            traj.success = task == "t1"
    provider.shutdown()
    return verdicts


def test_verify_plan_leaves_the_report_figures_unchanged(tmp_path: Path) -> None:
    plain, verified = tmp_path / "plain.jsonl", tmp_path / "verified.jsonl"
    run(plain, verify=False)
    verdicts = run(verified, verify=True)
    # The verifications did happen, and failed where they should.
    assert [v.failed for v in verdicts] == [2, None, 0, 2, None, 0]
    assert verified.stat().st_size > plain.stat().st_size
    records = {}
    for path in (plain, verified):
        found, _ = read_records([str(path)])
        records[path.name] = sorted(
            (
                r.trajectory_id,
                r.length,
                r.fed,
                r.first_error_cause,
                r.success,
                r.incomplete,
                r.disagreements,
            )
            for r in found
        )
    assert records["plain.jsonl"] == records["verified.jsonl"]
    assert records["plain.jsonl"][0][:4] == ("t1", 3, 1, "dependency")
    reports = [tg.build_report(read_records([str(p)])[0], by=["method"]) for p in (plain, verified)]
    assert reports[0] == reports[1]
