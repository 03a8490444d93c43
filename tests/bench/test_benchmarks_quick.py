"""Each overhead/throughput benchmark runs once in quick mode, so CI keeps them working.

No timing is asserted (timings belong to benchmarks/README.md); the correctness parts are:
no span lost, the report from the file equal to the one in process, DuckDB and the report
agreeing. Each runs in its own interpreter because the embedded exporter installs a global
tracer provider."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_quick(module: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"{module}.json"
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())


@pytest.mark.slow
def test_overhead_quick(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core", reason="the bench extra: pip install -e '.[bench]'")
    pytest.importorskip("icontract", reason="the bench extra: pip install -e '.[bench]'")
    result = run_quick("overhead", tmp_path)
    for case in (
        "bare",
        "validate_call",
        "toolguard off, schema only",
        "toolguard off",
        "toolguard off, produces",
        "validate_call+span(memory)",
        "validate_call+span(file)",
        "toolguard memory",
        "toolguard file",
        "langchain invoke",
        "icontract",
        "async toolguard off",
        "toolguard off, search",
        "validate_call search",
        "toolguard off, json_schema",
        "toolguard sdk batch",
        "validate_call+span(sdk batch)",
    ):
        assert result["time"][case] > 0, case
    assert all(math.isfinite(v) for v in result["ratios"].values()), result["ratios"]
    assert result["growth"]["ratio"] > 0 and result["growth_uniform"]["ratio"] > 0
    assert result["dispatch"]["ratio"] > 0
    # Every target is printed met or missed: the three shapes, tracing on (memory and file,
    # export included), growth with every check kind, many tools with misspelt names; the
    # realistic tool, the JSON-Schema-declared one and the SDK's own processor (issue 28).
    targets = list(result["targets"])
    assert len(targets) == 10, targets
    assert any(name.startswith("call 1000 / call 10") for name in targets)
    assert any("misspelt" in name for name in targets)


def test_overhead_parts_quick(tmp_path: Path) -> None:
    result = run_quick("overhead_parts", tmp_path)
    medians = result["samples_median_us"]
    assert set(medians) >= {"bare", "validate_call", "wrapt pass-through", "+ produces"}
    assert all(math.isfinite(v) and v > 0 for v in medians.values())
    # every part of the chain is reported, each a finite fraction of validate_call's overhead
    assert {"wrapt dispatch", "+ produces (vs + precondition)"} <= set(result["parts"])
    assert all(math.isfinite(part["median"]) for part in result["parts"].values())


@pytest.mark.slow
def test_no_span_lost_quick(tmp_path: Path) -> None:
    result = run_quick("no_span_lost", tmp_path)
    assert result["lost_call_spans"] == 0
    assert result["lost_summary_spans"] == 0
    assert result["duplicates"] == 0
    assert result["counts"]["call_spans"] == result["calls"]
    assert result["counts"]["summary_spans"] == result["trajectories"]
    assert result["report_equal"] == {"groups": True, "overall": True}


@pytest.mark.slow
def test_throughput_quick(tmp_path: Path) -> None:
    pytest.importorskip("duckdb", reason="the bench extra: pip install -e '.[bench]'")
    result = run_quick("throughput", tmp_path)
    assert result["ok"]
    for entry in result["files"].values():
        assert entry["same_answer"], entry
        assert entry["report"]["n"] == result["trajectories"]
        assert entry["file"]["spans"] == entry["file"]["call_spans"] + result["trajectories"]


@pytest.mark.slow
def test_sql_report_quick(tmp_path: Path) -> None:
    pytest.importorskip("duckdb", reason="the bench extra: pip install -e '.[bench]'")
    pytest.importorskip("chdb", reason="chdb comes with the dev extra")
    result = run_quick("sql_report", tmp_path)
    # The three routes must agree, or the timing compares different work.
    assert result["sql_equals_python"] and result["duckdb_differences"] == []
    assert set(result["targets"]) == {
        "SQL report >= 5x faster than the Python report",
        "Python report not slower than DuckDB read_json + the same metrics",
    }


@pytest.mark.slow
def test_pipeline_vs_previous_quick(tmp_path: Path) -> None:
    from benchmarks.pipeline_vs_previous import CASES, PREVIOUS

    known = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{PREVIOUS}^{{commit}}"], capture_output=True
    )
    if known.returncode != 0:
        pytest.skip(f"the previous revision {PREVIOUS} is not in this clone (a shallow clone?)")
    result = run_quick("pipeline_vs_previous", tmp_path)
    assert set(result["cases"]) == {f"{name} | {tracing}" for name, tracing, _ in CASES}
    for figures in result["cases"].values():
        assert math.isfinite(figures["old_us"]) and math.isfinite(figures["new_us"])
    # The counts are of one call beyond the bare function: every guarded call executes some
    # Python on each side (the search too: its trajectory bindings are written in Python).
    for key, figures in result["cases"].items():
        assert figures["old_bytecodes"] > 0 and figures["new_bytecodes"] > 0, key
