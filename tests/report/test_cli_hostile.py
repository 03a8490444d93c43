"""`toolguard report` / `compare` arguments that would lose data: an error, the input kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from spanfiles import Writer, export, trajectory

from toolguard._cli import main


@pytest.mark.parametrize("command", ["report", "compare"])
def test_out_naming_an_input_is_refused_and_the_input_kept(
    write_lines: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    spans = write_lines([export(*trajectory("A", [True], True, {"m": "x"}))])
    kept = spans.read_bytes()
    pattern = str(tmp_path / "*.jsonl")  # a glob naming it
    extra = ["--by", "m", "--a", "x", "--b", "y"] if command == "compare" else []
    assert main([command, pattern, "--out", str(spans), *extra]) == 2
    assert f"--out {spans} is the input {spans}: writing it would lose it" in (
        capsys.readouterr().err
    )
    assert spans.read_bytes() == kept


def test_out_naming_the_outcomes_file_is_refused(
    write_lines: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = write_lines([export(*trajectory("A", [True], True))])
    outcomes = tmp_path / "outcomes.csv"
    outcomes.write_text("trajectory_id,success\nA,true\n")
    assert main(["report", str(spans), "--outcomes", str(outcomes), "--out", str(outcomes)]) == 2
    assert outcomes.read_text() == "trajectory_id,success\nA,true\n"
    assert "is the input" in capsys.readouterr().err


def test_running_out_of_memory_is_one_line(
    write_lines: Writer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolguard._cli as cli

    def no_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(cli, "read_records", no_memory)
    spans = write_lines([export(*trajectory("A", [True], True))])
    assert main(["report", str(spans)]) == 2
    err = capsys.readouterr().err
    assert "toolguard: error: out of memory" in err and "Traceback" not in err


def test_a_glob_matching_only_folders_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "run1").mkdir()
    pattern = str(tmp_path / "run*")
    assert main(["report", pattern]) == 2
    err = capsys.readouterr().err
    assert f"{pattern}: matches only folders ({tmp_path / 'run1'}), no span file" in err
