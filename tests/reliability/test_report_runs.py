"""Runs appended to one file, and call spans lost (issue 11, "The report on hostile files").

A second run appended to the same span file writes the same trajectory ids again: the report
reads on by the contract's rules but says so, with how many trajectories and an example. A
trajectory whose summary says T while fewer call spans were read is counted in a warning."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_report_spans import call, export, summary, trajectory, write

from toolguard._cli import main
from toolguard.report.build import build_report
from toolguard.report.metrics import TrajectoryRecord
from toolguard.report.read import read_records


def run_lines(n: int, *, fed: int | None = None, success: bool = True) -> list[dict]:
    """One run of ``n`` trajectories t0..t{n-1}, three calls each; fresh span ids every call."""
    return [export(*trajectory(f"t{i}", 3, fed, success)) for i in range(n)]


def warnings_of(path: Path) -> list[str]:
    records, _ = read_records([str(path)])
    return build_report(records, resamples=5)["warnings"]


APPENDED = "have several summary spans"
SHORT = "have fewer call spans than their length"


def test_two_runs_appended_are_warned_with_an_example(tmp_path: Path) -> None:
    path = write(tmp_path / "spans.jsonl", run_lines(4))
    assert warnings_of(path) == []
    write(path, run_lines(4, fed=1, success=False), mode="a")  # the program ran again
    records, _ = read_records([str(path)])
    assert [r.summary_spans for r in records] == [2, 2, 2, 2]
    (warning,) = [w for w in build_report(records)["warnings"] if APPENDED in w]
    assert warning.startswith(
        "4 of 4 trajectories have several summary spans (e.g. trajectory 't0' has 2 summary "
        "spans): were two runs appended to one file?"
    )
    assert "Give each run its own file or its own trajectory ids" in warning
    # Still read by the contract's rules: one summary kept, the trajectory a disagreement.
    assert build_report(records)["overall"]["disagreements"] == 4
    write(path, run_lines(1), mode="a")
    assert any("trajectory 't0' has 3 summary spans" in w for w in warnings_of(path))


def test_the_command_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "spans.jsonl", run_lines(2) + run_lines(2))
    assert main(["report", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out.split("Warnings\n", 1)[1]
    assert "2 of 2 trajectories have several summary spans" in out
    assert "more than one summary span" not in out  # said once, with its likely reason


def test_the_same_spans_read_twice_are_not_two_runs(tmp_path: Path) -> None:
    lines = run_lines(3)
    once = write(tmp_path / "once.jsonl", lines)
    twice = write(tmp_path / "twice.jsonl", lines + lines[::-1])  # e.g. a file concatenated
    a, b = read_records([str(once)])[0], read_records([str(twice)])[0]
    assert a == b and all(r.summary_spans == 1 for r in b)
    assert not any(APPENDED in w for w in warnings_of(twice))


@settings(
    max_examples=40,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    runs=st.integers(1, 4),
    copies=st.lists(st.integers(1, 3), min_size=4, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_distinct_summaries_are_counted_exactly(
    tmp_path: Path, runs: int, copies: list[int], seed: int
) -> None:
    """Whatever the order and however often each summary span is repeated, the count is the
    number of distinct (trace id, span id), and the summary kept is always the same."""
    spans = [summary("t", 2, 3, span_id=f"{r + 1:016x}", success=r % 2 == 0) for r in range(runs)]
    spans += [call("t", 1), call("t", 2)]
    lines = [
        export(s) for s, k in zip(spans, copies + [1] * len(spans), strict=False) for _ in range(k)
    ]
    random.Random(seed).shuffle(lines)
    (r,), _ = read_records([str(write(tmp_path / "fuzz.jsonl", lines))])
    assert r.summary_spans == runs and r.success is True  # the smallest span id: run 0
    assert any(APPENDED in w for w in build_report([r], resamples=5)["warnings"]) == (runs > 1)


def test_lost_call_spans_are_counted(tmp_path: Path) -> None:
    full = trajectory("full", 3)
    lost = trajectory("lost", 5)
    del lost[1:3]  # steps 2 and 3 never reached the file
    gap = [call("gap", 1), call("gap", 3)]  # no summary either: incomplete, with a hole
    path = write(tmp_path / "spans.jsonl", [export(*full, *lost, *gap)])
    records = {r.trajectory_id: r for r in read_records([str(path)])[0]}
    assert (records["full"].call_spans, records["lost"].call_spans) == (3, 3)
    (warning,) = [w for w in warnings_of(path) if SHORT in w]
    assert warning.startswith("2 trajectories have fewer call spans than their length")
    assert "gap (2 of 3)" in warning and "lost (3 of 5)" in warning
    # The figures still come from the summary where there is one.
    assert (records["lost"].length, records["lost"].fed) == (5, 6)


def test_complete_files_have_no_such_warning(tmp_path: Path) -> None:
    path = write(tmp_path / "spans.jsonl", run_lines(5, fed=2))
    assert warnings_of(path) == []


def test_records_built_by_hand_are_not_flagged() -> None:
    """Without reading counts (None), nothing is guessed."""
    report = build_report([TrajectoryRecord("x", 4, 5, success=True)], resamples=5)
    assert report["warnings"] == []


def test_the_command_warns_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [export(*trajectory("a", 4)[2:])]  # steps 3, 4 and the summary
    path = write(tmp_path / "spans.jsonl", lines)
    assert main(["report", str(path), "--format", "json"]) == 0
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert warnings == [
        "1 trajectories have fewer call spans than their length: call spans were lost (a "
        "tracer provider shut down or an exporter failed mid-run?) or are in a file not given "
        "to the report. T, FED and Y still come from the summary span where there is one; "
        "without one they come from the call spans left: a (2 of 4)"
    ]
