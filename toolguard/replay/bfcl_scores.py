"""BFCL's own verdicts joined to a replay of its result files (``--bfcl-scores DIR``).

BFCL's checker writes, per model and category, ``<score dir>/<model>/multi_turn/
BFCL_v4_multi_turn_<category>_score.json``: JSON Lines whose first line is a summary
(``accuracy``, ``correct_count``, ``total_count``) and every further line one *failed* entry
(with its ``id``). So an entry of the result file is successful exactly when the score file
does not list it; the summary's ``total_count`` must be the result file's number of entries
(else the score file is of another run and the join is refused, not guessed).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .model import ReplayInputError


@dataclass
class Scores:
    """One score file: which entries BFCL failed, and its summary."""

    path: str
    total: int
    correct: int
    failed: set[str] = field(default_factory=set)

    def success(self, task_id: str) -> bool:
        return task_id not in self.failed

    def check(self, result_path: str, ids: list[str]) -> None:
        """Refuse a score file that is not the result file's: another entry count, or a
        failed id the result file does not hold."""
        if len(ids) != self.total:
            raise ReplayInputError(
                f"{self.path}: BFCL scored {self.total} entries, {result_path} holds "
                f"{len(ids)}: not the score file of this result file"
            )
        unknown = sorted(self.failed - set(ids))
        if unknown:
            raise ReplayInputError(
                f"{self.path}: lists {unknown[0]!r} as failed, which {result_path} does not "
                "hold: not the score file of this result file"
            )


def score_name(result_path: str | os.PathLike[str]) -> str:
    """``BFCL_v4_multi_turn_base_result.json`` -> ``BFCL_v4_multi_turn_base_score.json``."""
    name = Path(result_path).name
    stem = name.removesuffix(".json").removesuffix("_result")
    return f"{stem}_score.json"


def find(directory: str | os.PathLike[str], result_path: str, model: str) -> Path:
    """The score file of ``result_path`` under ``directory``: BFCL's score directory
    (``<model>/multi_turn/<name>``), a model's (``multi_turn/<name>``) or the folder
    holding the file itself."""
    root = Path(directory)
    if not root.is_dir():
        what = "is a file" if root.exists() else "does not exist"
        raise ReplayInputError(
            f"--bfcl-scores {directory} {what}: give BFCL's score folder (score/, a model's, "
            "or the folder of the score files)"
        )
    name = score_name(result_path)
    # dict.fromkeys: without a model folder in the path the first two are the last two.
    candidates = list(
        dict.fromkeys(
            [
                root / model / "multi_turn" / name,
                root / model / name,
                root / "multi_turn" / name,
                root / name,
            ]
        )
    )
    for path in candidates:
        if path.is_file():
            return path
    raise ReplayInputError(
        f"{result_path}: no BFCL score file for it under {directory} (looked for "
        f"{', '.join(str(p) for p in candidates)})"
    )


def load(path: Path) -> Scores:
    """Read one score file (its summary line, then the failed entries)."""
    where = os.fspath(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayInputError(f"{where}: cannot read: {exc}") from exc
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise ReplayInputError(f"{where}:{number}: not valid JSON ({exc})") from None
    if not rows or not isinstance(rows[0][1], dict) or "total_count" not in rows[0][1]:
        raise ReplayInputError(
            f"{where}:1: a BFCL score file starts with its summary "
            "({'accuracy': ..., 'correct_count': ..., 'total_count': ...})"
        )
    head = rows[0][1]
    scores = Scores(where, int(head["total_count"]), int(head.get("correct_count", 0)))
    for number, row in rows[1:]:
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise ReplayInputError(f"{where}:{number}: a failed entry has a string 'id'")
        scores.failed.add(row["id"])
    if scores.total - len(scores.failed) != scores.correct:
        raise ReplayInputError(
            f"{where}: the summary says {scores.correct} of {scores.total} correct, the file "
            f"lists {len(scores.failed)} failed entries"
        )
    return scores
