"""The three readings of a BFCL result file from the command line: the environment's answer,
a contract whose predicates read the live backends, and the undo-log dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import toolguard as tg
from toolguard.replay import ReplayInputError, bfcl_env, replay_files
from toolguard.replay.cli import main

pytestmark = pytest.mark.skipif(
    not bfcl_env.available(), reason="bfcl-eval not installed (make test installs it)"
)
NAME = "BFCL_v4_multi_turn_base_result.json"
# multi_turn_base_0 with its third call on a file that is not there: `cat` raises nothing,
# it answers {"error": ...}: the environment's rejection, after the fact.
MISSING = [
    ["[cd(folder='document'), cat(file_name='nothing.txt'), mkdir(dir_name='temp')]"],
    [],
    [],
    [],
]
RULES = """
def file_here(instance, file_name):
    return file_name in instance._current_dir.contents
"""


def result_file(root: Path) -> Path:
    path = root / "m" / "multi_turn" / NAME
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"id": "multi_turn_base_0", "result": MISSING}) + "\n")
    return path


def steps(out: Path, cohort: str) -> list[tuple[int, bool, str | None, str | None]]:
    """(step, valid, check, decision) of the cohort's call spans, read from the span file."""
    rows = []
    for line in out.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    a = {x["key"]: next(iter(x["value"].values())) for x in span["attributes"]}
                    tid = a.get("toolguard.trajectory.id", "")
                    if tid.startswith(f"{cohort}/") and "toolguard.step" in a:
                        rows.append(
                            (
                                int(a["toolguard.step"]),
                                a["toolguard.valid"],
                                a.get("toolguard.check"),
                                a.get("toolguard.decision"),
                            )
                        )
    return sorted(rows)


def test_environment_contract_and_dry_run_readings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "fs_rules.py").write_text(RULES)
    contract = tmp_path / "c.toml"
    contract.write_text(
        'mode = "block"\n[[tools.cat.preconditions]]\nid = "file_here"\n'
        'predicate = "fs_rules:file_here"\n'
    )
    out = tmp_path / "spans.jsonl"
    argv = ["bfcl", str(result_file(tmp_path)), "--out", str(out), "--quiet"]
    assert main([*argv, "--contract", str(contract), "--dry-run"]) == 0
    assert "readings: environment, with_contract, dry_run" in capsys.readouterr().err
    # The environment: cat ran, and its answer says it failed.
    assert steps(out, "environment") == [
        (1, True, None, "allowed"),
        (2, False, "state.error_result", "allowed"),
        (3, True, None, "allowed"),
    ]
    # The contract: its predicate read the live file system (after the real cd) and the
    # call was blocked before it ran.
    assert steps(out, "with_contract")[1] == (2, False, "precondition.file_here", "blocked")
    # The dry run: the call failed in the undo log, so it was rejected before it ran too.
    assert steps(out, "dry_run")[1][:2] == (2, False)
    assert steps(out, "dry_run")[1][2] == "state.dry_run"
    records, _ = tg.read_records([str(out)])
    by_cohort = {r.labels["replay"]: (r.length, r.fed) for r in records}
    assert by_cohort == {"environment": (3, 2), "with_contract": (3, 2), "dry_run": (3, 2)}


def test_the_harness_rules_as_a_contract_file(tmp_path: Path) -> None:
    pytest.importorskip("tomli_w")
    contract_module = pytest.importorskip("benchmarks.bfcl.contract")
    path = tmp_path / "bfcl.toml"
    assert contract_module.write_contract(path) > 50
    loaded = tg.load_contract(path)
    assert [p.id for p in loaded.tools["cat"].preconditions] == ["file_exists"]
    out = tmp_path / "spans.jsonl"
    replay_files("bfcl", [result_file(tmp_path)], out, contract=path)
    assert steps(out, "with_contract")[1][:3] == (2, False, "precondition.file_exists")


def test_a_dry_run_needs_the_live_backends(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps([{"role": "user", "content": "hi"}]) + "\n")
    with pytest.raises(ReplayInputError, match="only the bfcl format has"):
        replay_files("openai", [runs], tmp_path / "out.jsonl", dry_run=True)
