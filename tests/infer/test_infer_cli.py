"""`toolguard infer` from the command line: the file it writes, and bad input as warnings
with exit 0 and an empty contract, never a traceback."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from runs import run, write

import toolguard as tg
from toolguard.__main__ import main


def _contacts(n: int) -> list[dict]:
    return [
        run(
            f"r{i}",
            f"remove Person{i}",
            ("search_contact", {"name": f"Person{i}"}, {"contacts": [{"id": f"id_{i}00"}]}),
            ("remove_contact", {"contact_id": f"id_{i}00"}, {"ok": True}),
        )
        for i in range(6)
    ]


def test_writes_a_contract_load_contract_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write(str(tmp_path), _contacts(6))
    out = tmp_path / "c.toml"
    assert main(["infer", src, "--out", str(out), "--explain"]) == 0
    contract = tg.load_contract(out)
    assert contract.tools["remove_contact"].refs == {"contact_id": "contact_id"}
    table = capsys.readouterr().out
    assert "remove_contact  contact_id" in table and "search_contact: contacts[].id (6)" in table


def _empty(out: Path) -> dict:
    data = tomllib.loads(out.read_text())
    assert data.get("tools", {}) == {}
    return data


def test_no_recorded_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row = run("r0", "hi", ("search_contact", {"name": "Ann"}, {}))
    row["messages"] = row["messages"][:2]  # the call, never answered
    src = write(str(tmp_path), [row])
    out = tmp_path / "c.toml"
    assert main(["infer", src, "--out", str(out)]) == 0
    _empty(out)
    err = capsys.readouterr().err
    assert "tool 'search_contact': 1 call(s) with no recorded result" in err
    assert "Traceback" not in err


def test_no_accepted_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [run("r0", "hi", ("remove_contact", {"contact_id": "id_1"}, {}), error_at=0)]
    out = tmp_path / "c.toml"
    assert main(["infer", write(str(tmp_path), rows), "--out", str(out)]) == 0
    _empty(out)
    assert "tool 'remove_contact': no call the environment accepted" in capsys.readouterr().err


def test_a_file_of_another_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(str(tmp_path), _contacts(6), "good.jsonl")
    other = tmp_path / "tau2.json"
    other.write_text(json.dumps({"simulations": [{"id": "s", "messages": 3}]}))
    out = tmp_path / "c.toml"
    assert main(["infer", str(other), good, "--out", str(out), "--format", "tau2"]) == 0
    _empty(out)
    err = capsys.readouterr().err
    assert f"{other}: not read as tau2" in err
    assert "1 source(s) could not be read as tau2: no rule written" in err
    assert "Traceback" not in err


def test_nothing_in_the_file_is_evaluated(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    rows = [run(f"r{i}", code, ("tool", {"arg": code}, {"out": code})) for i in range(6)]
    out = tmp_path / "c.toml"
    assert main(["infer", write(str(tmp_path), rows), "--out", str(out)]) == 0
    assert not marker.exists()
    assert code not in out.read_text()


def test_a_bad_option_is_status_2(tmp_path: Path) -> None:
    assert main(["infer", "x", "--out", str(tmp_path / "c"), "--min-share", "2"]) == 2


def test_runs_of_two_files_with_one_id_are_two_trajectories(tmp_path: Path) -> None:
    # Three runs in each file, named alike: six trajectories of evidence, not three.
    rows = _contacts(6)
    a = write(str(tmp_path), rows[:3], "a.jsonl")
    b_rows = [dict(r, id=f"r{i}") for i, r in enumerate(rows[3:])]
    b = write(str(tmp_path), b_rows, "b.jsonl")
    out = tmp_path / "c.toml"
    assert main(["infer", a, b, "--out", str(out)]) == 0
    text = out.read_text()
    assert "from 6 trajectories" in text
    assert tg.load_contract(out).tools["remove_contact"].refs == {"contact_id": "contact_id"}
