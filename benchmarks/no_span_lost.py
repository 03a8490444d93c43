"""No span lost: a tight loop of guarded calls with the embedded default exporter.

    python -m benchmarks.no_span_lost [--quick] [--calls 100000] [--trajectories 1000]

Every call span and every trajectory summary must reach the file (counted), and the report
computed from the file by `toolguard report` must equal the one computed in process from the
trajectories themselves.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

import toolguard as tg
from toolguard import _contract as A
from toolguard.report.build import build_report
from toolguard.report.metrics import TrajectoryRecord

from . import _workload as w
from ._timing import write_json

BY = ("model", "method")


def run_agents(calls: int, trajectories: int, seed: int) -> tuple[list[TrajectoryRecord], float]:
    """Drive the guard like many short agent episodes; some calls are invalid on purpose, so
    every cause-free and failing path writes spans. Returns the in-process records."""
    rng = random.Random(seed)
    # guard.call returns a Rejection for a blocked call: the loop goes on, as an agent would
    guard = tg.Guard(state=w.Bank())
    guard.register(w.transfer, **w.tool_options())
    guard.register(w.receipts(), name="open_account", produces={"receipt_id": "account_id"})
    per = calls // trajectories
    records = []
    start = time.perf_counter()
    for t in range(trajectories):
        labels = {"model": f"m{t % 3}", "method": ("react", "plan")[t % 2]}
        with tg.trajectory(f"traj-{t:06d}", labels=labels) as traj:
            traj.bind("account_id", w.ACCOUNT)
            for _ in range(per):
                r = rng.random()
                if r < 0.97:
                    guard.call("transfer", w.ARGS)
                elif r < 0.98:
                    guard.call("transfer", w.CLOSED_ARGS)  # dependency: never bound
                elif r < 0.99:
                    guard.call("transfer", {**w.ARGS, "amount": "lots"})  # schema
                else:
                    guard.call("open_account", w.ARGS)
            traj.success = None if t % 7 == 0 else rng.random() < 0.8
        records.append(
            TrajectoryRecord(
                traj.id,
                traj.length,
                traj.first_error_depth,
                traj.first_error_cause,
                traj.success,
                traj.labels,
            )
        )
    return records, time.perf_counter() - start


def count_spans(path: Path) -> dict[str, int]:
    counts = {"lines": 0, "call_spans": 0, "summary_spans": 0, "other_spans": 0, "distinct": 0}
    seen: set[tuple[str, str]] = set()
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            counts["lines"] += 1
            for rs in orjson.loads(line).get("resourceSpans", ()):
                for ss in rs.get("scopeSpans", ()):
                    for span in ss.get("spans", ()):
                        seen.add((span["traceId"], span["spanId"]))
                        name = span.get("name", "")
                        if name.startswith(A.OPERATION_EXECUTE_TOOL + " "):
                            counts["call_spans"] += 1
                        elif name == A.SUMMARY_SPAN_NAME:
                            counts["summary_spans"] += 1
                        else:
                            counts["other_spans"] += 1
    counts["distinct"] = len(seen)
    return counts


def report_from_file(path: Path) -> dict[str, Any]:
    """What a user runs: the `toolguard report` command, JSON output."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolguard",
            "report",
            str(path),
            "--format",
            "json",
            "--by",
            ",".join(BY),
            "--quiet",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10,000 calls in 100 trajectories")
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--trajectories", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    calls, trajs = (10_000, 100) if args.quick else (args.calls, args.trajectories)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spans.jsonl"
        provider = tg.setup_file_export(path)
        records, loop_s = run_agents(calls, trajs, args.seed)
        start = time.perf_counter()
        provider.force_flush(timeout_millis=600_000)  # what the atexit hook does
        flush_s = time.perf_counter() - start
        counts = count_spans(path)
        from_file = report_from_file(path)
    in_process = json.loads(
        json.dumps(build_report(sorted(records, key=lambda r: r.trajectory_id), by=BY))
    )
    expected = {"call_spans": trajs * (calls // trajs), "summary_spans": trajs}
    result = {
        "calls": expected["call_spans"],
        "trajectories": trajs,
        "counts": counts,
        "lost_call_spans": expected["call_spans"] - counts["call_spans"],
        "lost_summary_spans": expected["summary_spans"] - counts["summary_spans"],
        "duplicates": counts["call_spans"] + counts["summary_spans"] - counts["distinct"],
        "report_equal": {k: from_file[k] == in_process[k] for k in ("groups", "overall")},
        "warnings_file": from_file["warnings"],
        "warnings_in_process": in_process["warnings"],
        "loop_seconds": loop_s,
        "calls_per_second": expected["call_spans"] / loop_s,
        "flush_seconds_after_loop": flush_s,
        "ter_overall": in_process["overall"]["ter"],
    }
    result["ok"] = (
        result["lost_call_spans"] == 0
        and result["lost_summary_spans"] == 0
        and result["duplicates"] == 0
        and all(result["report_equal"].values())
    )
    print(
        f"{result['calls']:,} guarded calls in {trajs:,} trajectories: "
        f"{loop_s:.1f} s in the loop ({result['calls_per_second']:,.0f} calls/s), "
        f"{flush_s:.2f} s to flush what was still queued"
    )
    print(
        f"in the file: {counts['call_spans']:,} call spans, {counts['summary_spans']:,} "
        f"summaries, {counts['lines']:,} lines; lost {result['lost_call_spans']} call spans, "
        f"{result['lost_summary_spans']} summaries; {result['duplicates']} duplicates"
    )
    print(
        f"report from the file == report in process: groups {result['report_equal']['groups']},"
        f" overall {result['report_equal']['overall']} (overall TER {result['ter_overall']:.3f})"
    )
    print("OK" if result["ok"] else "FAILED")
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:])["ok"] else 1)
