"""benchmarks/store.py runs in quick mode (no timing asserted: the figures belong to
benchmarks/README.md; the round trips per call are counted, not timed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_store_benchmark_quick(redis_url: str, tmp_path: Path) -> None:
    out = tmp_path / "store.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.store", "--url", redis_url, "--quick", "--json",
         str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["calls"]["check only"]["round_trips_per_call"] == 1.0
    assert result["calls"]["binds"]["round_trips_per_call"] == 2.0
    # the finish is posted: a call that binds waits for one round trip, as one that checks
    assert result["calls"]["binds"]["round_trips_waited_per_call"] == 1.0
    assert result["calls"]["check only"]["round_trips_waited_per_call"] == 1.0
    assert set(result["calls_per_s"]["redis"]) == {"1", "4", "16"}
