"""The report three ways on one generated million-span file, in one run:

    python -m benchmarks.sql_report [--quick] [--rounds 3] [--json FILE]

- `toolguard report FILE --by model,method --format json` (Python: read, fold, metrics with
  bootstrap intervals, warnings, JSON out), beside its floor: an orjson parse of every line
  with the garbage collector off, as the command has it while it reads;
- the same report computed by ClickHouse: the SQL of toolguard/report/clickhouse_sql.py on
  chdb (embedded ClickHouse) over an `otel_traces` table with the OpenTelemetry Collector's
  ClickHouse exporter DDL, loaded from the same spans (the load is timed apart: a ClickHouse
  user's spans are in the table already);
- DuckDB `read_json` over the same file computing the same metrics (benchmarks/_duck.py).

The file is shaped like a busy exporter's: 10,000 trajectories of 100 calls, up to 2,048
spans per line (benchmarks/_spanfile.py). Interleaved rounds, the order rotated each round;
figures are medians. The SQL report must equal the Python report field for field, and
DuckDB's figures must equal the report's, or the run fails.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ._spanfile import generate
from ._timing import print_targets, write_json

BY = ["model", "method"]


def parse_only(path: Path) -> None:
    """The floor: every line parsed and dropped, the collector off as in the report."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        with path.open("rb") as f:
            for line in f:
                orjson.loads(line)
    finally:
        if was_on:
            gc.enable()


def python_report(path: Path, *more: str) -> dict[str, Any]:
    from toolguard._cli import main

    argv = ["report", str(path), "--by", ",".join(BY), "--format", "json", "--quiet", *more]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(argv)
    if status:
        raise RuntimeError(f"toolguard report exited with {status}")
    return dict(json.loads(out.getvalue()))


class Chdb:
    """An embedded ClickHouse holding the spans as `otel_traces` rows."""

    def __init__(self, workdir: Path) -> None:
        from chdb import session

        self.session = session.Session(str(workdir / "chdb"))

    def run(self, sql: str) -> list[dict[str, Any]]:
        out = self.session.query(sql, "JSONEachRow")
        return [orjson.loads(line) for line in out.bytes().splitlines() if line.strip()]

    def load(self, spans: Path, rows: Path) -> dict[str, float]:
        """Convert the spans to the exporter's rows, create the table, insert them."""
        from toolguard.report.clickhouse_rows import (
            OTEL_TRACES_DDL,
            insert_file_sql,
            request_to_rows,
        )

        start = time.perf_counter()
        with spans.open("rb") as f, rows.open("wb") as out:
            for line in f:
                for row in request_to_rows(orjson.loads(line)):
                    out.write(orjson.dumps(row) + b"\n")
        converted = time.perf_counter()
        self.session.query("DROP TABLE IF EXISTS otel_traces")
        self.session.query(OTEL_TRACES_DDL.format(table="otel_traces"))
        self.session.query(insert_file_sql("otel_traces", str(rows)))
        self.session.query("OPTIMIZE TABLE otel_traces FINAL")
        loaded = time.perf_counter()
        return {"convert_s": converted - start, "load_s": loaded - converted}

    def report(self, _: Path, cost: bool = False) -> dict[str, Any]:
        from toolguard.report.clickhouse import sql_report

        return dict(sql_report(self.run, "otel_traces", by=BY, cost=cost))


def median_ratio(samples: dict[str, list[float]], a: str, b: str) -> float:
    return statistics.median(x / y for x, y in zip(samples[a], samples[b], strict=True))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="200 x 20 calls, 1 round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--with-cost",
        action="store_true",
        help="also time both reports with --cost (tokens and tool time; two more cases)",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    trajectories, calls = (200, 20) if args.quick else (10_000, 100)
    rounds = 1 if args.quick else args.rounds
    import duckdb

    from ._duck import duck_report, same_figures

    con = duckdb.connect()
    result: dict[str, Any] = {"trajectories": trajectories, "calls": calls}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = work / "spans.jsonl"
        start = time.perf_counter()
        result["file"] = generate(path, trajectories, calls, per_line=2048)
        print(
            f"generated {result['file']['spans']:,} spans in {result['file']['lines']:,} lines, "
            f"{result['file']['bytes'] / 1e6:,.0f} MB ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
        ch = Chdb(work)
        result["chdb_load"] = ch.load(path, work / "rows.jsonl")
        print(
            f"chdb: rows written in {result['chdb_load']['convert_s']:.1f} s, loaded into "
            f"otel_traces in {result['chdb_load']['load_s']:.1f} s",
            flush=True,
        )
        cases: dict[str, Callable[[Path], Any]] = {
            "parse only (orjson, gc off)": parse_only,
            "toolguard report (Python)": python_report,
            "SQL report (chdb)": ch.report,
            "DuckDB read_json + metrics": lambda p: duck_report(p, con),
        }
        if args.with_cost:
            cases["toolguard report --cost (Python)"] = lambda p: python_report(p, "--cost")
            cases["SQL report --cost (chdb)"] = lambda p: ch.report(p, cost=True)
        samples: dict[str, list[float]] = {name: [] for name in cases}
        values: dict[str, Any] = {}
        order = list(cases)
        for r in range(rounds):
            for name in order[r % len(order) :] + order[: r % len(order)]:
                t0 = time.perf_counter()
                values[name] = cases[name](path)
                samples[name].append(time.perf_counter() - t0)
                print(f"  round {r + 1}: {name} {samples[name][-1]:.2f} s", flush=True)
    py = values["toolguard report (Python)"]
    result["seconds"] = {k: statistics.median(v) for k, v in samples.items()}
    result["python_over_sql"] = median_ratio(
        samples, "toolguard report (Python)", "SQL report (chdb)"
    )
    result["python_over_duckdb"] = median_ratio(
        samples, "toolguard report (Python)", "DuckDB read_json + metrics"
    )
    result["python_over_parse"] = median_ratio(
        samples, "toolguard report (Python)", "parse only (orjson, gc off)"
    )
    result["sql_equals_python"] = json.dumps(values["SQL report (chdb)"]) == json.dumps(py)
    result["duckdb_differences"] = same_figures(values["DuckDB read_json + metrics"], py)
    if args.with_cost:
        result["cost_sql_equals_python"] = json.dumps(
            values["SQL report --cost (chdb)"]
        ) == json.dumps(values["toolguard report --cost (Python)"])
        result["python_over_sql_with_cost"] = median_ratio(
            samples, "toolguard report --cost (Python)", "SQL report --cost (chdb)"
        )
    result["ok"] = (
        result["sql_equals_python"]
        and not result["duckdb_differences"]
        and result.get("cost_sql_equals_python", True)
    )
    result["targets"] = {
        "SQL report >= 5x faster than the Python report": result["python_over_sql"] >= 5.0,
        "Python report not slower than DuckDB read_json + the same metrics": (
            result["python_over_duckdb"] <= 1.0
        ),
    }
    report(result)
    write_json(args.json, result)
    return result


def report(result: dict[str, Any]) -> None:
    spans = result["file"]["spans"]
    print(f"\n{spans:,} spans, {result['file']['bytes'] / 1e6:,.0f} MB:")
    for name, s in result["seconds"].items():
        print(f"  {name:34} {s:8.2f} s  {spans / s / 1e3:8.0f} k spans/s")
    print(
        f"  (chdb load, apart: {result['chdb_load']['load_s']:.1f} s; rows written "
        f"{result['chdb_load']['convert_s']:.1f} s)"
    )
    print(f"  Python / SQL:        {result['python_over_sql']:.2f}")
    print(f"  Python / DuckDB:     {result['python_over_duckdb']:.2f}")
    print(f"  Python / parse-only: {result['python_over_parse']:.2f}")
    print(f"  SQL report equals the Python report: {result['sql_equals_python']}")
    if "cost_sql_equals_python" in result:
        print(
            f"  with --cost: Python / SQL {result['python_over_sql_with_cost']:.2f}, equal: "
            f"{result['cost_sql_equals_python']}"
        )
    print(f"  DuckDB figures equal the report's: {not result['duckdb_differences']}")
    for d in result["duckdb_differences"][:5]:
        print(f"    {d}")
    print_targets(result["targets"])


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:])["ok"] else 1)
