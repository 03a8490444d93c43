"""BFCL result files: write trajectories in that format; reading them is
``toolguard.replay.bfcl`` (``toolguard replay bfcl``), re-exported here for the harness.

BFCL writes one JSON object per line, ``{"id": "multi_turn_base_0", "result": [...]}``, with
one list per turn and one item per model step. The reader skips a step it cannot decode, as
BFCL's checker does, and refuses a malformed line or a file none of whose entries decodes to
a call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolguard.replay.bfcl import (
    Call,
    category_of,
    decode_entry,
    decode_step,
    model_name,
    read_result_file,
)

__all__ = [
    "RESULT_NAME",
    "category_of",
    "decode_entry",
    "decode_step",
    "model_name",
    "read_result_file",
    "write_result_file",
]

RESULT_NAME = "BFCL_v4_multi_turn_{category}_result.json"


def write_result_file(
    path: Path, entries: Iterable[tuple[str, int, list[tuple[int, Call]]]], style: str = "prompting"
) -> None:
    """Write (task id, number of turns, calls) as BFCL result lines: one step per turn.

    ``style="prompting"`` writes each step as a Python call-list string,
    ``style="fc"`` as a list of ``{name: json arguments}`` - BFCL's two handler families.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for task_id, n_turns, calls in entries:
            turns: list[list[Any]] = [[] for _ in range(n_turns)]
            for turn in range(n_turns):
                mine = [c for t, c in calls if t == turn]
                if not mine:
                    continue
                if style == "fc":
                    turns[turn].append([{c.name: json.dumps(c.kwargs)} for c in mine])
                else:
                    turns[turn].append("[" + ", ".join(c.render() for c in mine) + "]")
            fh.write(json.dumps({"id": task_id, "result": turns}) + "\n")
