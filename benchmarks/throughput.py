"""The report's throughput and memory, side by side with the alternatives, on generated files.

    python -m benchmarks.throughput [--quick] [--rounds 3] [--no-memory]

For a file of 100,000 and one of 1,000,000 call spans (10,000 trajectories each, up to 2,048
spans a line as a busy exporter writes them), interleaved rounds of: the parse-only floor
(orjson.loads on every line, nothing kept, the garbage collector off as in the report), the
whole `toolguard report --format json` (read, fold, metrics with bootstrap intervals, JSON
out), and DuckDB `read_json` + SQL for the same metrics (benchmarks/_duck.py). Then peak
memory of the report on each file, each in a fresh process.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from ._spanfile import generate
from ._timing import median, print_targets, time_ratio, write_json


def parse_only(path: Path) -> None:
    """The floor: every line parsed and dropped, with the garbage collector off as the
    command has it while it reads (the comparison is of work, not of collector settings)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        with path.open("rb") as f:
            for line in f:
                orjson.loads(line)
    finally:
        if was_on:
            gc.enable()


def toolguard_report(path: Path) -> dict[str, Any]:
    from toolguard._cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["report", str(path), "--format", "json", "--quiet"])
    if status:
        raise RuntimeError(f"toolguard report exited with {status}")
    return json.loads(out.getvalue())


_PEAK_CODE = """
import json, sys, tracemalloc
from pathlib import Path
from benchmarks.throughput import toolguard_report, peak_rss
import toolguard._cli  # imports are not the report's memory
base = peak_rss()
tracemalloc.start()
toolguard_report(Path(sys.argv[1]))
heap = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"heap_peak": heap, "max_rss": peak_rss(), "rss_after_imports": base}))
"""


def peak_rss() -> int:
    """This process's peak resident memory in bytes. VmHWM, not ru_maxrss: Linux carries a
    parent's peak into ru_maxrss across fork and exec, and the parent here just ran DuckDB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_memory(path: Path) -> dict[str, float]:
    """Peak of the report in a fresh interpreter: Python heap (tracemalloc) and resident."""
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_CODE, str(path)],
        check=True,
        capture_output=True,
        text=True,
        cwd=root,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed(fn: Any, path: Path) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn(path)
    return time.perf_counter() - start, value


def bench_file(path: Path, rounds: int, con: Any) -> dict[str, Any]:
    from toolguard.report.read import read_records

    from ._duck import ter_mean_fed

    cases: dict[str, Any] = {
        "parse only (orjson)": parse_only,
        # Where the report's time goes: reading and folding spans, vs the metrics after.
        "report: read + fold only": lambda p: read_records([str(p)]),
        "toolguard report": toolguard_report,
    }
    if con is not None:
        cases["duckdb read_json + SQL"] = lambda p: ter_mean_fed(p, con)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    values: dict[str, Any] = {}
    order = list(cases)
    for r in range(rounds):
        # Rotate the order so no case always runs right after the file went cold or warm.
        for name in order[r % len(order) :] + order[: r % len(order)]:
            seconds, values[name] = timed(cases[name], path)
            samples[name].append(seconds)
    out: dict[str, Any] = {"seconds": {k: median(v) for k, v in samples.items()}}
    out["report_over_parse"] = time_ratio(samples, "toolguard report", "parse only (orjson)")
    out["fold_over_parse"] = time_ratio(samples, "report: read + fold only", "parse only (orjson)")
    overall = values["toolguard report"]["overall"]
    out["report"] = {"n": overall["n"], "ter": overall["ter"], "mean_fed": overall["mean_fed"]}
    if con is not None:
        out["report_over_duckdb"] = time_ratio(
            samples, "toolguard report", "duckdb read_json + SQL"
        )
        ter, mean_fed, n = values["duckdb read_json + SQL"]
        out["duckdb"] = {"n": n, "ter": ter, "mean_fed": mean_fed}
        # The two routes must agree, or the timing compares different work.
        out["same_answer"] = (
            n == overall["n"]
            and abs(ter - overall["ter"]) < 1e-9
            and abs(mean_fed - overall["mean_fed"]) < 1e-9
        )
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2,000/20,000 spans, 1 round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--no-memory",
        action="store_true",
        help="skip the peak-memory runs (under tracemalloc the million-span file alone takes "
        "about 3 minutes on 2 cores; `make bench` skips them to stay within 5 minutes)",
    )
    parser.add_argument(
        "--trajectories",
        type=int,
        default=10_000,
        help="trajectories per file (%(default)s: files of 100,000 and 1,000,000 call spans; "
        "`make bench` halves them to stay within 5 minutes, `make bench-sql` runs a million)",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    # Quick: the same shape, small enough for CI (2,000 and 20,000 call spans).
    trajectories, sizes = (500, (4, 40)) if args.quick else (args.trajectories, (10, 100))
    rounds = 1 if args.quick else args.rounds
    try:
        import duckdb

        con = duckdb.connect()
    except ImportError:
        con = None
        print("duckdb is not installed (pip install -e '.[bench]'): its column is left out")
    result: dict[str, Any] = {"trajectories": trajectories, "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for calls in sizes:
            path = Path(tmp) / f"spans-{calls}.jsonl"
            start = time.perf_counter()
            # Lines as a busy exporter writes them: up to 2,048 spans each.
            info = generate(path, trajectories, calls, per_line=2048)
            info["call_spans"] = trajectories * calls
            print(
                f"generated {info['call_spans']:,} call spans + {trajectories:,} summaries in "
                f"{info['lines']:,} lines, {info['bytes'] / 1e6:,.0f} MB "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
            entry = {"file": info, **bench_file(path, rounds, con)}
            if not args.no_memory:
                entry["memory"] = peak_memory(path)
            result["files"][str(info["call_spans"])] = entry
            path.unlink()
    small, large = (result["files"][str(trajectories * c)] for c in sizes)
    if not args.no_memory:
        result["heap_peak_ratio"] = large["memory"]["heap_peak"] / small["memory"]["heap_peak"]
        result["rss_ratio"] = large["memory"]["max_rss"] / small["memory"]["max_rss"]
    result["targets"] = targets(result)
    result["ok"] = all(e.get("same_answer", True) for e in result["files"].values())
    report(result)
    write_json(args.json, result)
    return result


def targets(result: dict[str, Any]) -> dict[str, bool]:
    met = {}
    for size, e in result["files"].items():
        met[f"{size}: report <= 2x parse-only"] = e["report_over_parse"] <= 2.0
        if "report_over_duckdb" in e:
            met[f"{size}: report faster than duckdb"] = e["report_over_duckdb"] < 1.0
    if "heap_peak_ratio" in result:
        met["peak heap 10x spans, same trajectories <= 1.2x"] = result["heap_peak_ratio"] <= 1.2
        met["peak RSS 10x spans, same trajectories <= 1.2x"] = result["rss_ratio"] <= 1.2
    return met


def report(result: dict[str, Any]) -> None:
    for size, e in result["files"].items():
        print(
            f"\n{int(size):,} call spans in {result['trajectories']:,} trajectories "
            f"({e['file']['bytes'] / 1e6:,.0f} MB):"
        )
        spans = e["file"]["spans"]
        for name, s in e["seconds"].items():
            print(f"  {name:26} {s:8.2f} s  {spans / s / 1e3:8.0f} k spans/s")
        print(
            f"  report / parse-only: {e['report_over_parse']:.2f}"
            f"   (read + fold alone: {e['fold_over_parse']:.2f})"
        )
        if "report_over_duckdb" in e:
            print(
                f"  report / duckdb:     {e['report_over_duckdb']:.2f}"
                f"   (same TER and mean FED: {e['same_answer']})"
            )
        if "memory" in e:
            m = e["memory"]
            print(
                f"  peak: heap {m['heap_peak'] / 1e6:.1f} MB, peak RSS {m['max_rss'] / 1e6:.1f} MB"
            )
    if "heap_peak_ratio" in result:
        print(
            f"\npeak heap, 10x the spans in the same trajectories: "
            f"{result['heap_peak_ratio']:.2f}x (peak RSS {result['rss_ratio']:.2f}x)"
        )
    else:
        print("\npeak memory not measured (--no-memory)")
    print_targets(result["targets"])


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:])["ok"] else 1)
