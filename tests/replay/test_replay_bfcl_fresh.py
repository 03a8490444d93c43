"""BFCL result files scored as BFCL scores them: every task from fresh backend state, and
entries whose inference failed counted (T = 0, not successful) instead of stopping the
replay or being dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolguard.replay import bfcl_env

needs_bfcl = pytest.mark.skipif(
    not bfcl_env.available(), reason="bfcl-eval not installed (make test installs it)"
)

# multi_turn_base_5's ground truth (BFCL's possible answer) as a prompting model writes it:
# its tweet is posted without `mentions`, so it gets TwitterAPI.post_tweet's default list.
BASE_5 = [
    ["[cd(folder='project'), mv(source='analysis_report.csv', destination='archive')]"],
    ["[cat(file_name='archive_summary.txt'), sort(file_name='archive_summary.txt')]"],
    [
        "[authenticate_twitter(username='dr_smith', password='securePass123'), "
        "post_tweet(content='Managed to archive important data files!', "
        "tags=['#DataManagement', '#Efficiency'])]"
    ],
    ["[comment(tweet_id=0, comment_content='Another successful task completed today!')]"],
]
# Another model's run of it that also mentions someone on that tweet: `mention` extends the
# tweet's list in place, which is the default list shared by every later post_tweet.
MENTIONS = [*BASE_5[:3], [BASE_5[3][0][:-1] + ", mention(tweet_id=0, "
                          "mentioned_usernames=['@stale'])]"]]  # fmt: skip
INFERENCE_ERROR = "Error during inference: Request timed out."


def result_file(path: Path, entries: list[tuple[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": i, "result": r}) + "\n" for i, r in entries))
    return path


@needs_bfcl
def test_a_file_scores_the_same_alone_and_after_other_files(tmp_path: Path) -> None:
    main = pytest.importorskip("benchmarks.bfcl.__main__")
    name = "BFCL_v4_multi_turn_base_result.json"
    mine = result_file(tmp_path / "model-a" / "multi_turn" / name, [("multi_turn_base_5", BASE_5)])
    other = result_file(
        tmp_path / "model-b" / "multi_turn" / name, [("multi_turn_base_5", MENTIONS)]
    )

    def verdicts(*files: Path) -> dict[tuple[str, str], bool]:
        return {(s.model, s.task.id): s.success for s in main.score_result_files(list(files))}

    alone = verdicts(mine)
    assert alone == {("model-a", "multi_turn_base_5"): True}  # it is the ground truth
    assert verdicts(other, mine) == {
        ("model-b", "multi_turn_base_5"): False,  # its extra mention: not the expected state
        ("model-a", "multi_turn_base_5"): True,
    }
    assert verdicts(mine) == alone


@needs_bfcl
def test_backend_defaults_are_restored_for_each_fresh_environment() -> None:
    cls = bfcl_env.backend_class("TwitterAPI")
    task = bfcl_env.task("multi_turn_base_5")
    assert task is not None
    execute = bfcl_env.environment(task)()
    from toolguard.replay.model import RecordedCall

    login = {"username": "dr_smith", "password": "securePass123"}
    assert not execute(RecordedCall("authenticate_twitter", login)).error
    posted = execute(RecordedCall("post_tweet", {"content": "x"})).result
    execute(RecordedCall("mention", {"tweet_id": posted["id"], "mentioned_usernames": ["@a"]}))
    assert cls.post_tweet.__defaults__ == ([], ["@a"])  # the leak, within one task (as BFCL)
    bfcl_env.environment(task)()  # the next task's backends
    assert cls.post_tweet.__defaults__ == ([], [])


@needs_bfcl
def test_inference_errors_are_failed_trajectories_of_no_call(tmp_path: Path, replay: Any) -> None:
    path = result_file(
        tmp_path / "model-a" / "multi_turn" / "BFCL_v4_multi_turn_base_result.json",
        [("multi_turn_base_5", BASE_5), ("multi_turn_base_6", INFERENCE_ERROR)],
    )
    done = replay("bfcl", [path])
    assert done.figures() == {
        "model-a/multi_turn_base_5": (7, 8),
        "model-a/multi_turn_base_6": (0, 1),
    }
    failed = done.records["environment/model-a/multi_turn_base_6"]
    assert failed.success is False and failed.labels["inference_error"] == "true"
    assert "inference_error" not in done.records["environment/model-a/multi_turn_base_5"].labels
    assert done.stats.inference_errors == 1 and done.stats.runs == 2
    # Every reading counts it so: a dry run has nothing to fork in it.
    (tmp_path / "spans.jsonl").unlink()
    dry = replay("bfcl", [path], dry_run=True)
    assert dry.figures("dry_run")["model-a/multi_turn_base_6"] == (0, 1)
    # All inference errors is a file BFCL scores 0 on, not a malformed one.
    only = result_file(tmp_path / "m" / "r.json", [("multi_turn_base_6", INFERENCE_ERROR)])
    assert replay("bfcl", [only]).figures() == {"m/multi_turn_base_6": (0, 1)}


@needs_bfcl
def test_the_harness_scores_inference_errors_as_bfcl_does(tmp_path: Path) -> None:
    main = pytest.importorskip("benchmarks.bfcl.__main__")
    path = result_file(
        tmp_path / "model-a" / "multi_turn" / "BFCL_v4_multi_turn_base_result.json",
        [("multi_turn_base_5", BASE_5), ("multi_turn_base_6", INFERENCE_ERROR)],
    )
    scored = {s.task.id: (s.success, s.inference_error) for s in main.score_result_files([path])}
    assert scored == {"multi_turn_base_5": (True, False), "multi_turn_base_6": (False, True)}
