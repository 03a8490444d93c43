"""`toolguard report` / `toolguard compare`: output forms, the JSON interface, exit codes."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from spanfiles import Writer, export, trajectory

from toolguard._cli import main

SECTION5_GROUP_KEYS = {
    "labels", "n", "ter", "mean_fed", "auc_pec", "n_empty", "pec", "pec_elig", "n_at_depth",
    "final_success", "n_outcome_known", "rr", "rr_eligible", "s", "causes", "ci",
    "incomplete", "disagreements",
}  # fmt: skip
SECTION5_CI_KEYS = {"ter", "final_success", "rr", "s", "auc_pec", "mean_fed"}
CAUSE_KEYS = {"schema", "dependency", "precondition", "state_consistency", "information"}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def worked(write_lines: Writer) -> Path:
    """The paper's contact-removal example, two models, tasks labelled."""
    return write_lines(
        [
            export(*trajectory("A", ["state_consistency", True, True], True,
                               {"model": "m1", "task": "remove"})),
            export(*trajectory("B", [True, True], True, {"model": "m2", "task": "remove"})),
        ]
    )  # fmt: skip


def test_json_is_the_section5_object(worked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["report", str(worked), "--format", "json"], capsys)
    assert code == 0 and err == ""
    rep = json.loads(out)
    assert set(rep) == {"groups", "overall", "warnings"}
    assert len(rep["groups"]) == 1 and rep["groups"][0]["labels"] == {}
    for obj in (rep["groups"][0], rep["overall"]):
        assert set(obj) >= SECTION5_GROUP_KEYS
        assert set(obj["ci"]) >= SECTION5_CI_KEYS
        assert set(obj["causes"]) == CAUSE_KEYS
    g = rep["groups"][0]
    assert (g["ter"], g["mean_fed"], g["auc_pec"], g["rr"], g["s"]) == (0.5, 2.0, 0.5, 1.0, 1.0)
    assert g["pec"] == [0.5, 0.5, 0.0] and g["pec_elig"] == [0.5, 0.5, 0.0]
    assert rep["warnings"] == []


def test_by_groups_on_labels(worked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["report", str(worked), "--by", "model", "--format", "json"], capsys)
    rep = json.loads(out)
    assert code == 0
    assert [g["labels"] for g in rep["groups"]] == [{"model": "m1"}, {"model": "m2"}]
    assert [g["ter"] for g in rep["groups"]] == [0.0, 1.0]
    assert rep["overall"]["n"] == 2 and rep["overall"]["ter"] == 0.5


def test_missing_label_is_grouped_under_null_and_warned(
    write_lines: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines([export(*trajectory("a", [True], True, {"model": "m"}),
                               *trajectory("b", [True], True))])  # fmt: skip
    rep = json.loads(run(["report", str(path), "--by", "model", "--format", "json"], capsys)[1])
    assert [g["labels"]["model"] for g in rep["groups"]] == ["m", None]
    assert any("lack label 'model'" in w for w in rep["warnings"])


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_outcomes_override_the_spans(
    worked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    out_file = tmp_path / f"outcomes.{kind}"
    if kind == "jsonl":
        rows = [{"trajectory_id": "A", "success": False}, {"trajectory_id": "zz", "success": True}]
        out_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        out_file.write_text("trajectory_id,success\nA,false\nzz,true\n")
    code, out, _ = run(
        ["report", str(worked), "--outcomes", str(out_file), "--format", "json"], capsys
    )
    g = json.loads(out)["overall"]
    assert code == 0
    # A (broke, was a success in its span) now failed: RR 0, final success 1/2.
    assert (g["rr"], g["final_success"], g["s"]) == (0.0, 0.5, 1.0)
    warnings = json.loads(out)["warnings"]
    assert any("1 outcomes" in w and "name no trajectory" in w for w in warnings)


def test_bad_outcomes_file_is_an_error(
    worked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "o.csv"
    bad.write_text("trajectory_id,success\nA,maybe\n")
    code, _, err = run(["report", str(worked), "--outcomes", str(bad)], capsys)
    assert code == 2 and f"{bad}:2" in err and "maybe" in err
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"trajectory_id,success\ncaf\xe9,true\n")
    code, _, err = run(["report", str(worked), "--outcomes", str(latin)], capsys)
    assert code == 2 and f"{latin}: outcomes are not UTF-8 text (byte 25)" in err


@pytest.mark.parametrize("depths", ["0", "-1", "three"])
def test_depths_must_be_a_positive_whole_number(
    worked: Path, depths: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["report", str(worked), "--depths", depths], capsys)
    assert code == 2 and "argument --depths" in err and "Traceback" not in err


def test_table_markdown_csv(worked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, table, _ = run(["report", str(worked), "--by", "model"], capsys)
    assert code == 0
    assert "TER" in table and "AUC-PEC" in table and "RR-elig" in table and "PEC@k" in table
    assert "model=m1" in table and "0.500 [" in table
    _, md, _ = run(["report", str(worked), "--format", "markdown"], capsys)
    assert md.startswith("**Prefix executability") and "| group | N | TER |" in md
    _, text, _ = run(["report", str(worked), "--by", "model", "--format", "csv"], capsys)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["model"] for r in rows] == ["m1", "m2", "all"]
    assert [float(r["ter"]) for r in rows] == [0.0, 1.0, 0.5]
    assert rows[2]["pec_elig_3"] == "0.0" and rows[1]["pec_3"] == ""


def test_warnings_are_printed_under_the_table(
    write_lines: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    from spanfiles import call

    path = write_lines([export(call("inc", 1), *trajectory("ok", [True]))])
    code, out, _ = run(["report", str(path)], capsys)
    assert code == 0
    warnings = out.split("Warnings\n", 1)[1]
    assert "no summary span" in warnings and "inc" in warnings
    assert "no known outcome" in warnings


def test_errors_are_one_line_exit_2(
    write_lines: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(["{oops"])
    code, out, err = run(["report", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"{path}:1:" in err and "Traceback" not in err
    assert run(["report", str(path) + ".missing"], capsys)[0] == 2
    # An empty file (a session without a call) is an empty report with a warning (issue 22).
    code, out, _ = run(["report", str(write_lines([], "e.jsonl")), "--format", "json"], capsys)
    assert code == 0 and "e.jsonl) is empty" in json.loads(out)["warnings"][0]
    assert run(["report"], capsys)[0] == 2  # argparse: no FILE
    assert run(["report", str(path), "--format", "xml"], capsys)[0] == 2


def test_skip_invalid_via_cli(write_lines: Writer, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines(["{oops", export(*trajectory("a", [True]))])
    code, out, _ = run(["report", str(path), "--skip-invalid", "--format", "json"], capsys)
    assert code == 0
    assert any(f"1 invalid input lines skipped; the first: {path}:1" in w
               for w in json.loads(out)["warnings"])  # fmt: skip


def test_python_dash_m(worked: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", str(worked), "--format", "json"],
        capture_output=True, text=True, cwd=Path(__file__).parents[2], check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["overall"]["ter"] == 0.5
    bad = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", str(worked) + ".nope"],
        capture_output=True, text=True, cwd=Path(__file__).parents[2], check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plot(
    worked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / f"pec.{suffix}"
    code, _, err = run(["report", str(worked), "--by", "model", "--plot", str(out)], capsys)
    assert code == 0, err
    head = out.read_bytes()[:64]
    assert head.startswith(b"\x89PNG") if suffix == "png" else b"<svg" in out.read_bytes()


def test_plot_without_matplotlib_names_the_extra(
    worked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    code, out, err = run(["report", str(worked), "--plot", str(tmp_path / "p.png")], capsys)
    assert code == 2 and out == ""
    assert err.strip().endswith("pip install 'toolguard-otel[plot]'") and err.count("\n") == 1
