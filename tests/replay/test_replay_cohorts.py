"""Two recorded runs of one model in one span file stay two cohorts: the id prefix from
``--labels`` (or ``--id-prefix``) keeps their trajectories apart, and an append that would
merge trajectories is refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import toolguard as tg
from toolguard.replay import ReplayInputError, bfcl_env, replay_files

needs_bfcl = pytest.mark.skipif(
    not bfcl_env.available(), reason="bfcl-eval not installed (make test installs it)"
)
NAME = "BFCL_v4_multi_turn_base_result.json"
# multi_turn_base_0: the ground truth of its first turn, then nothing (a run that stops).
GOOD = [["[cd(folder='document'), mkdir(dir_name='temp')]"], [], [], []]
BAD = [["[cd(folder='nope')]"], [], [], []]  # the backend refuses the folder


def result_file(directory: Path, result: list[list[str]]) -> Path:
    path = directory / "gpt-x" / "multi_turn" / NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps({"id": f"multi_turn_base_{i}", "result": result}) + "\n" for i in (0, 1))
    )
    return path


@needs_bfcl
def test_two_methods_of_one_model_appended_stay_two_cohorts(tmp_path: Path) -> None:
    react = result_file(tmp_path / "react", GOOD)
    dual = result_file(tmp_path / "dual", BAD)
    out = tmp_path / "spans.jsonl"
    replay_files("bfcl", [react], out, labels={"method": "react"})
    replay_files("bfcl", [dual], out, labels={"method": "dual"}, append=True)
    records, _ = tg.read_records([str(out)])
    report = tg.build_report(records, by=["method"])
    groups = {g["labels"]["method"]: g for g in report["groups"]}
    assert report["overall"]["n"] == 4
    assert all("no known outcome" in w for w in report["warnings"])  # BFCL files have no Y
    # multi_turn_base_1 has other backends (its cd fails too); both dual runs break at once.
    assert groups["dual"]["n"] == 2 and groups["dual"]["mean_fed"] == 1.0
    assert groups["react"]["n"] == 2
    assert {r.trajectory_id for r in records} >= {
        "environment/method=react/gpt-x/multi_turn_base_0",
        "environment/method=dual/gpt-x/multi_turn_base_0",
    }


@needs_bfcl
def test_an_append_that_would_merge_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    react = result_file(tmp_path / "react", GOOD)
    dual = result_file(tmp_path / "dual", BAD)
    out = tmp_path / "spans.jsonl"
    replay_files("bfcl", [react], out, labels={"method": "react"}, id_prefix="")
    before = out.read_bytes()
    with pytest.raises(ReplayInputError, match=r"method: 'react' there, 'dual' here"):
        replay_files("bfcl", [dual], out, labels={"method": "dual"}, id_prefix="", append=True)
    assert out.read_bytes() == before
    assert not list(tmp_path.glob("spans.jsonl.*"))  # no part file left behind
    with pytest.raises(ReplayInputError, match=r"with the same labels"):
        replay_files("bfcl", [react], out, labels={"method": "react"}, id_prefix="", append=True)
    assert out.read_bytes() == before
