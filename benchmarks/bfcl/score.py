"""BFCL's own verdicts on multi-turn result files, written as BFCL's score files.

``python -m benchmarks.bfcl score RESULT_FILE... --out SCORE_DIR`` runs BFCL's multi-turn
checker (``bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker.multi_turn_checker``,
imported, not copied) on each entry, as BFCL's ``multi_turn_runner`` does: an entry whose
result is not a list is an inference error, one with another number of turns than the
ground truth was force-terminated, every other is decoded step by step (a step that does
not decode is skipped) and checked. It writes ``SCORE_DIR/<model>/multi_turn/
BFCL_v4_multi_turn_<category>_score.json`` (the summary line, then one line per failed
entry), which ``toolguard replay bfcl --bfcl-scores SCORE_DIR`` joins.

Why not BFCL's CLI: its runner imports every model handler (and their SDKs); the handler is
only used to decode steps, which ``toolguard.replay.bfcl`` does. Each file is scored in a
process of its own, as a fresh ``bfcl evaluate`` would: BFCL's backends keep module state
(``post_tweet``'s mutable default) that leaks from one file to the next otherwise. BFCL's
checker runs the calls with ``eval``: score only result files you trust.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.bfcl.data import package_root
from toolguard.replay.bfcl import CallParseError, category_of, decode_step, model_name


def _entries(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _check(entry: dict[str, Any], task: dict[str, Any], truth: list[list[str]]) -> dict[str, Any]:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    result = entry["result"]
    if not isinstance(result, list):
        return {"valid": False, "error_type": "multi_turn:inference_error"}
    if len(result) != len(truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated"}
    decoded: list[list[list[str]]] = []
    for turn in result:
        steps = []
        for item in turn:
            try:
                calls = decode_step(item)
            except (CallParseError, ValueError, TypeError):
                continue
            if calls:
                steps.append([c.render() for c in calls])
        decoded.append(steps)
    model = "toolguard-replay"
    checked: dict[str, Any] = multi_turn_checker(
        decoded, truth, task, category_of(task["id"]), model
    )
    return checked


def score_file(result: Path, out: Path) -> Path:
    """Score one result file in this process; returns the score file written."""
    root = package_root() / "data"
    entries = sorted(_entries(result), key=lambda e: e["id"])
    category = category_of(entries[0]["id"])
    tasks = {e["id"]: e for e in _entries(root / f"BFCL_v4_multi_turn_{category}.json")}
    answers = {
        e["id"]: e["ground_truth"]
        for e in _entries(root / "possible_answer" / f"BFCL_v4_multi_turn_{category}.json")
    }
    failed = []
    for entry in entries:
        verdict = _check(entry, tasks[entry["id"]], answers[entry["id"]])
        if not verdict.pop("valid"):
            failed.append(
                {
                    "id": entry["id"],
                    "test_category": f"multi_turn_{category}",
                    "valid": False,
                    "error": verdict,
                }
            )
    total = len(entries)
    header = {
        "accuracy": (total - len(failed)) / total,
        "correct_count": total - len(failed),
        "total_count": total,
    }
    path = out / model_name(result) / "multi_turn" / f"BFCL_v4_multi_turn_{category}_score.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, default=str) + "\n" for r in [header, *failed]))
    return path


def score_files(results: Sequence[Path], out: Path) -> list[dict[str, Any]]:
    """Score each file in a fresh process; the summary line of each, with its file."""
    summaries = []
    for result in results:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.bfcl.score", str(result), str(out)],
            capture_output=True,
            text=True,
            check=True,
        )
        path = Path(proc.stdout.strip().splitlines()[-1])
        head = json.loads(path.read_text().splitlines()[0])
        summaries.append({"result": str(result), "score": str(path), **head})
    return summaries


if __name__ == "__main__":  # one file, in this fresh process (score_files runs it so)
    print(score_file(Path(sys.argv[1]), Path(sys.argv[2])))
