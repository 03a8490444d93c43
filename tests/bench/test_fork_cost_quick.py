"""benchmarks/fork_cost.py runs once in quick mode (no timing is asserted: the figures are in
docs/fork-and-plans.md); every environment and figure is there and finite."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_fork_cost_quick(tmp_path: Path) -> None:
    out = tmp_path / "fork_cost.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.fork_cost", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert set(result["results"]) == {
        "dict 10, deep copy",
        "dict 1,000, deep copy",
        "dict 10, undo log",
        "dict 1,000, undo log",
        "SQLite 1,000, savepoint",
        "SQLite, no COMMIT guard",
    }
    for figures in result["results"].values():
        assert all(math.isfinite(v) for v in figures.values()), figures
        assert figures["tool_us"] > 0 and figures["fork_discard_us"] > 0
    assert len(result["targets"]) == 6
