"""The cost benchmark's generator and probe: the same seed gives the same runs, infer reads
them, and each measurement is a run of the command that succeeded."""

from __future__ import annotations

from pathlib import Path

from benchmarks.infer.cost import markdown, measure_cost
from benchmarks.infer.synthetic import write_synthetic


def test_the_generator_is_seeded(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    assert write_synthetic(a, 40, seed=1) == write_synthetic(b, 40, seed=1) > 0
    write_synthetic(c, 40, seed=2)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    assert len(a.read_text().splitlines()) == 40


def test_cost_runs_the_command(tmp_path: Path) -> None:
    rows = measure_cost(300, tmp_path, None)
    assert set(rows) == {"baseline (no run)", "synthetic 300"}
    row = rows["synthetic 300"]
    assert row["code"] == 0 and row["trajectories"] == 300 and row["calls"] > 300
    assert row["said"].startswith("inferred ") and "from 300 trajectories" in row["said"]
    contract = (tmp_path / "synthetic-300.toml").read_text()
    assert 'refs."ticket_id" = "ticket_id"' in contract
    assert "| synthetic 300 | 300 |" in markdown(rows)
