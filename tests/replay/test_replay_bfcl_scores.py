"""BFCL's own verdicts as the outcomes of a BFCL replay (``--bfcl-scores``), and the refusal
of result files of another BFCL version than the installed data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolguard.replay import ReplayInputError, bfcl_env
from toolguard.replay.cli import main

pytestmark = pytest.mark.skipif(
    not bfcl_env.available(), reason="bfcl-eval not installed (make test installs it)"
)
NAME = "BFCL_v4_multi_turn_base_result.json"
# multi_turn_base_0's ground truth (BFCL's possible answer), a prompting model's strings.
BASE_0 = [
    ["[cd(folder='document'), mkdir(dir_name='temp'), "
     "mv(source='final_report.pdf', destination='temp')]"],
    ["[cd(folder='temp'), grep(file_name='final_report.pdf', pattern='budget analysis')]"],
    ["[sort('final_report.pdf')]"],
    ["[cd(folder='..'), mv(source='previous_report.pdf', destination='temp'), cd(folder='temp'), "
     "diff(file_name1='final_report.pdf', file_name2='previous_report.pdf')]"],
]  # fmt: skip
WRONG = [BASE_0[0], [], BASE_0[2], BASE_0[3]]  # skips turn 2: BFCL fails it


def result_file(root: Path, entries: list[tuple[str, Any]], name: str = NAME) -> Path:
    path = root / "model-a" / "multi_turn" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": i, "result": r}) + "\n" for i, r in entries))
    return path


def test_bfcl_s_verdicts_become_the_outcomes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    score = pytest.importorskip("benchmarks.bfcl.score")
    import toolguard as tg

    entries = [
        ("multi_turn_base_0", BASE_0),
        ("multi_turn_base_1", "Error during inference: timeout"),
    ]
    result = result_file(tmp_path / "result", entries)
    wrong = result_file(tmp_path / "wrong", [("multi_turn_base_0", WRONG)])
    scores = tmp_path / "score"
    # BFCL's own checker writes the score files, in BFCL's layout and format.
    written = score.score_file(result, scores)
    assert written == scores / "model-a" / "multi_turn" / "BFCL_v4_multi_turn_base_score.json"
    head = json.loads(written.read_text().splitlines()[0])
    assert head == {"accuracy": 0.5, "correct_count": 1, "total_count": 2}
    out = tmp_path / "spans.jsonl"
    argv = ["bfcl", str(result), "--out", str(out), "--bfcl-scores", str(scores), "--quiet"]
    assert main(argv) == 0
    assert "outcomes: BFCL's verdicts (2 entries)" in capsys.readouterr().err
    records, _ = tg.read_records([str(out)])
    report = tg.build_report(records)
    assert report["overall"]["final_success"] == head["accuracy"]
    assert report["overall"]["n"] == head["total_count"]
    assert {r.trajectory_id: r.success for r in records} == {
        "environment/model-a/multi_turn_base_0": True,
        "environment/model-a/multi_turn_base_1": False,
    }
    # A score file of another run (another entry count) is refused, naming both files.
    other = tmp_path / "other"
    score.score_file(wrong, other)
    argv = ["bfcl", str(result), "--out", str(out), "--bfcl-scores", str(other), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "BFCL scored 1 entries" in err and "not the score file of this result file" in err
    assert not out.exists()  # no half span file
    # ... and so is a result file with no score file.
    argv = ["bfcl", str(wrong), "--out", str(out), "--bfcl-scores", str(tmp_path), "--quiet"]
    assert main(argv) == 2
    assert "no BFCL score file for it under" in capsys.readouterr().err
    # BFCL fails a run that skips a turn, and the join says so.
    assert (
        json.loads((other / "model-a" / "multi_turn" / written.name).read_text().split("\n")[1])[
            "id"
        ]
        == "multi_turn_base_0"
    )


def test_a_result_file_of_another_bfcl_version_is_refused(tmp_path: Path, replay: Any) -> None:
    v3 = result_file(
        tmp_path, [("multi_turn_base_0", BASE_0)], "BFCL_v3_multi_turn_base_result.json"
    )
    with pytest.raises(ReplayInputError, match=r"a BFCL_v3 result file, but the installed "
                       r"bfcl-eval \S+ holds BFCL_v4 data"):  # fmt: skip
        replay("bfcl", [v3])
    unknown = result_file(tmp_path / "u", [("multi_turn_base_9999", BASE_0)])
    with pytest.raises(ReplayInputError, match=r"'multi_turn_base_9999' is not in the installed "
                       r"bfcl-eval \S+ \(BFCL_v4 data\)"):  # fmt: skip
        replay("bfcl", [unknown])
    longer = result_file(tmp_path / "l", [("multi_turn_base_0", [*BASE_0, []])])
    with pytest.raises(ReplayInputError, match=r"has 5 turns here, 4 in the installed"):
        replay("bfcl", [longer])
    done = replay("bfcl", [result_file(tmp_path / "ok", [("multi_turn_base_0", BASE_0)])])
    labels = done.records["environment/model-a/multi_turn_base_0"].labels
    assert labels["bfcl_eval"] == bfcl_env.version() != "unknown"
