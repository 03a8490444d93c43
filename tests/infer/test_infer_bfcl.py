"""`python -m benchmarks.infer` end to end on a few BFCL tasks: inferred from the ground truth
of some, replayed on the mutants of the others, the counts consistent with each other."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval", reason="the BFCL measurement needs bfcl-eval's backends")

from benchmarks.infer.__main__ import main, measure


def test_counts_are_consistent(tmp_path: Path) -> None:
    summary = measure(4, tmp_path, 0, min_support=2)
    assert summary["train_tasks"] and summary["test_tasks"]
    tomllib.loads((tmp_path / "inferred.toml").read_text())  # a contract file
    for kind, row in summary["rows"].items():
        assert row["rejected"] + row["accepted"] == row["calls"], kind
        for name, caught in row["caught"].items():
            assert 0 <= caught <= row["rejected"], (kind, name)
        assert row["both"] <= min(row["caught"]["inferred"], row["caught"]["hand rules"])
        # Log mode runs every call in every reading, so the states agree: the inferred
        # contract's checks before the fork flag what each of them flags alone.
        for key in ("caught", "flags", "flags_at_mutation"):
            both = row[key].get("inferred + dry run", 0)
            assert both >= row[key].get("dry run", 0), (kind, key)
            assert both >= row[key].get("inferred", 0), (kind, key)
    held = summary["held_out_ground_truth"]
    assert held["runs"] == summary["test_tasks"] and held["accepted"] > 0


def test_writes_its_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--limit", "2", "--out", str(tmp_path)]) == 0
    assert "| mutation | calls | env rejections |" in (tmp_path / "infer.md").read_text()
    assert "Held-out ground truth" in capsys.readouterr().out
