"""The paper's contact case (docs/protocol.md 3.4, trajectory A) split over two guards in two
processes sharing one Redis store: one summary, T = 3, FED = 1, from both span files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import toolguard as tg
from toolguard import _contract as contract

WORKER = str(Path(__file__).with_name("store_worker.py"))


def run_worker(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, WORKER, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def spans_of(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                out.extend(ss["spans"])
    return out


def attrs(span: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_contact_case_across_two_processes(redis_url: str, tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    a = run_worker("contact", "first", redis_url, str(first), "traj-A")
    # Process 1: the phone number is no contact id (step 1, dependency); the search binds it.
    assert a["results"][0] == {"rejected": "dependency.contact_id"}
    assert [(s, d) for s, d, _ in a["verdicts"]] == [(1, "blocked"), (2, "allowed")]
    b = run_worker("contact", "second", redis_url, str(second), "traj-A")
    # Process 2: the id process 1's search produced is a live contact id here: step 3 runs.
    assert b["results"] == [{"removed": "id_8923"}]
    assert b["verdicts"] == [[3, "allowed", None]]
    assert (b["length"], b["fed"]) == (3, 1)

    summaries = [
        attrs(s)
        for p in (first, second)
        for s in spans_of(p)
        if s["name"] == contract.SUMMARY_SPAN_NAME
    ]
    assert len(summaries) == 1
    summary = summaries[0]
    assert summary[contract.TRAJECTORY_LENGTH] in (3, "3")
    assert summary[contract.TRAJECTORY_FED] in (1, "1")
    assert summary[contract.TRAJECTORY_FIRST_ERROR_CAUSE] == "dependency"
    assert summary[contract.LABEL_PREFIX + "model"] == "m"
    assert summary[contract.TRAJECTORY_SUCCESS] is True

    records, _ = tg.read_records([str(first), str(second)])
    report = tg.build_report(records)
    overall = report["overall"]
    assert (overall["n"], overall["ter"], overall["mean_fed"]) == (1, 0.0, 1.0)
    assert overall["causes"]["dependency"] == 1
    assert overall["incomplete"] == 0 and overall["disagreements"] == 0
    assert overall["rr"] == 1.0 and overall["n_at_depth"] == [1, 1, 1]
