"""``toolguard replay`` as a command: arguments, messages, exit statuses."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from chatlog import calls, tool, user, write_jsonl

import toolguard as tg
from toolguard.replay import ReplayStats
from toolguard.replay.api import _Progress
from toolguard.replay.cli import main

RUN = {
    "id": "r1",
    "reward": 1,
    "messages": [user("go"), calls(("c1", "f", {"x": 1})), tool("c1", "Error: no")],
}
BROKEN = {"id": "r2", "messages": [user("go"), tool("c9", "orphan")]}


def test_replay_then_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_jsonl(tmp_path / "runs.jsonl", [RUN, [user("hi")]])
    out = tmp_path / "out" / "spans.jsonl"
    assert main(["openai", str(log), "--out", str(out), "--labels", "model=m, method=react"]) == 0
    captured = capsys.readouterr()
    assert "replayed 2 runs (1 tool calls) from 1 file(s): 2 trajectories" in captured.out
    assert f"next: toolguard report {out}" in captured.err
    records, _ = tg.read_records([str(out)])
    # The labels go into the trajectory ids (the default --id-prefix): cohorts stay apart.
    assert {r.trajectory_id: (r.length, r.fed, r.labels["model"]) for r in records} == {
        "environment/method=react,model=m/r1": (1, 1, "m"),
        "environment/method=react,model=m/runs#2": (0, 1, "m"),
    }
    # Replaced, not appended, on a second run; --append adds.
    assert main(["openai", str(log), "--out", str(out), "--quiet"]) == 0
    lines = out.read_text()
    assert main(["openai", str(log), "--out", str(out), "--quiet", "--append"]) == 2
    assert "trajectory 'environment/r1'" in capsys.readouterr().err  # would merge: refused
    assert out.read_text() == lines  # and nothing was appended
    argv = ["openai", str(log), "--out", str(out), "--quiet", "--append", "--id-prefix", "b"]
    assert main(argv) == 0
    assert out.read_text().count("\n") == 2 * lines.count("\n")


def test_errors_name_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_jsonl(tmp_path / "runs.jsonl", [RUN, BROKEN])
    out = tmp_path / "spans.jsonl"
    assert main(["openai", str(log), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"toolguard: error: {log}:2 (run 2): message 1 is a tool answer")
    assert main(["openai", str(log), "--out", str(out), "--skip-invalid", "--quiet"]) == 0
    assert "skipped 1 invalid run(s); first: " + f"{log}:2" in capsys.readouterr().err
    assert main(["openai", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 2
    assert "missing.jsonl: cannot open" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["openai", str(empty), "--out", str(out)]) == 2
    assert f"{empty}: no run" in capsys.readouterr().err


def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_jsonl(tmp_path / "runs.jsonl", [RUN])
    out = str(tmp_path / "s.jsonl")
    assert main(["yaml", str(log), "--out", out]) == 2
    assert main(["openai", str(log), "--out", out, "--labels", "novalue"]) == 2
    assert "expected key=value" in capsys.readouterr().err
    bad = tmp_path / "c.toml"
    bad.write_text("[tools.f]\nrefs = 3\n")
    assert main(["openai", str(log), "--out", out, "--contract", str(bad)]) == 2
    assert "tool 'f', key 'refs'" in capsys.readouterr().err


def test_contract_mistakes_name_the_contract_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_jsonl(tmp_path / "runs.jsonl", [RUN])
    out = str(tmp_path / "s.jsonl")
    # refs naming no argument of the schema the file gives: an error naming the file
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(
        '[tools.f]\nrefs = { y = "k" }\n'
        'json_schema = { type = "object", properties = { x = { type = "integer" } } }\n'
    )
    assert main(["openai", str(log), "--out", out, "--contract", str(wrong)]) == 2
    err = capsys.readouterr().err
    assert f"toolguard: error: {wrong}: tool 'f': refs names 'y'" in err
    assert "Traceback" not in err
    # a tool no run offered or called (misspelt): its rules check nothing, said once
    typo = tmp_path / "typo.toml"
    typo.write_text('[tools.ff]\nrefs = { x = "k" }\n\n[tools.f]\ngrounded = ["x"]\n')
    assert main(["openai", str(log), "--out", out, "--contract", str(typo)]) == 0
    err = capsys.readouterr().err
    assert err.count("no replayed run offered or called") == 1 and "(misspelt?): ff\n" in err
    right = tmp_path / "right.toml"
    right.write_text('[tools.f]\ngrounded = ["x"]\n')
    assert main(["openai", str(log), "--out", out, "--contract", str(right)]) == 0
    assert "no replayed run offered or called" not in capsys.readouterr().err


def test_the_progress_line() -> None:
    stream = io.StringIO()
    meter = _Progress(True, stream)
    meter._next = 0.0
    meter.update(ReplayStats(files=["runs.jsonl"], runs=1200, calls=34000, skipped=2))
    meter.done()
    assert "replaying runs.jsonl: 1,200 runs, 34,000 calls, 2 skipped" in stream.getvalue()
    quiet = io.StringIO()
    off = _Progress(False, quiet)
    off._next = 0.0
    off.update(ReplayStats())
    off.done()
    assert quiet.getvalue() == ""
