"""`toolguard compare`: paired differences on shared tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spanfiles import Writer, export, trajectory

from toolguard._cli import main
from toolguard.report.compare import compare
from toolguard.report.metrics import TrajectoryRecord


@pytest.fixture
def runs(write_lines: Writer) -> Path:
    def t(tid: str, method: str, task: str, vs: list, ok: bool) -> list:
        return trajectory(tid, vs, ok, {"method": method, "task": task})

    return write_lines([export(
        *t("a1", "react", "t1", [True, True], True),
        *t("a1b", "react", "t1", [True, True], False),  # a repeat: the task's value is the mean
        *t("a2", "react", "t2", ["schema", True], False),
        *t("a3", "react", "t3", [True, "schema"], True),
        *t("a4", "react", "t4", [True], False),
        *t("b1", "plan", "t1", [True, True], True),
        *t("b2", "plan", "t2", [True, True], True),
        *t("b3", "plan", "t3", [True, True], False),
        *t("b5", "plan", "t5", [True], True),
    )])  # fmt: skip


def test_paired_differences(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compare", str(runs), "--by", "method", "--a", "react", "--b", "plan"]
    code = main([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    res = json.loads(out)
    assert (res["n_paired"], res["n_tasks_a"], res["n_tasks_b"]) == (3, 4, 4)
    m = res["metrics"]
    # Per task, B - A: TER 0, 1, 1; AUC-PEC 0, 1, 0.5; final success 0.5, 1, -1.
    assert m["ter"]["diff"] == pytest.approx(2 / 3)
    assert m["auc_pec"]["diff"] == pytest.approx(0.5)
    assert m["final_success"]["diff"] == pytest.approx(1 / 6)
    assert m["ter"]["a"] == pytest.approx(1 / 3) and m["ter"]["b"] == 1.0
    for v in m.values():
        assert v["n_paired"] == 3 and v["ci"][0] <= v["diff"] <= v["ci"][1]
    assert any("only in" in w for w in res["warnings"])
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "paired on label 'task': 3 tasks" in table and "+0.667" in table


def test_nothing_to_pair_is_an_error(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(runs), "--by", "method", "--a", "react", "--b", "nope"]) == 2
    assert "no trajectory has method=nope" in capsys.readouterr().err
    assert main(["compare", str(runs), "--by", "method,task", "--a", "react,t4",
                 "--b", "plan,t5"]) == 2  # fmt: skip
    assert "share no 'task'" in capsys.readouterr().err
    assert main(["compare", str(runs), "--by", "method,task", "--a", "react", "--b", "x,y"]) == 2


def test_a_group_compared_with_itself_is_an_error(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(runs), "--by", "method", "--a", "react", "--b", "react"]) == 2
    assert "--a and --b name the same group ('react'): nothing to compare" in (
        capsys.readouterr().err
    )
    argv = ["compare", str(runs), "--by", "method,task", "--a", "react, t1", "--b", "react,t1"]
    assert main(argv) == 2


def test_api_identical_groups_differ_by_zero() -> None:
    recs = [
        TrajectoryRecord(f"{g}{i}", 3, 1 + i % 4, "schema" if i % 4 < 3 else None, i % 2 == 0,
                         {"g": g, "task": str(i)})
        for g in "ab" for i in range(20)
    ]  # fmt: skip
    res = compare(recs, {"g": "a"}, {"g": "b"})
    for m in res["metrics"].values():
        assert m["diff"] == 0.0 and m["ci"] == [0.0, 0.0] and m["n_paired"] == 20
