"""BFCL result files: read a model's multi-turn results, write trajectories in that format.

BFCL writes one JSON object per line, ``{"id": "multi_turn_base_0", "result": [...]}``, with
one list per turn and one item per model step. An item is whatever the model handler
produced: a prompting model's text (``"[cd(folder='x'), ls()]"``), a function-calling model's
list of ``{name: arguments}`` (arguments as JSON text or a dict), or an already decoded list
of call strings. BFCL's checker skips items it cannot decode; so do we.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.bfcl.data import Call, CallParseError, parse_call

RESULT_NAME = "BFCL_v4_multi_turn_{category}_result.json"


def decode_step(item: Any) -> list[Call]:
    """One model step -> its calls; raises CallParseError when it is not a call list."""
    if isinstance(item, str):
        text = item.strip("`\n ")
        if not text.startswith("["):
            text = f"[{text}]"
        try:
            node = ast.parse(text, mode="eval").body
        except SyntaxError as exc:
            raise CallParseError(f"not a call list: {item[:80]!r}") from exc
        if not isinstance(node, ast.List):
            raise CallParseError(f"not a call list: {item[:80]!r}")
        return [parse_call(ast.unparse(element)) for element in node.elts]
    if isinstance(item, list):
        calls = []
        for element in item:
            if isinstance(element, str):
                calls.append(parse_call(element))
            elif isinstance(element, dict) and len(element) == 1:
                ((name, args),) = element.items()
                kwargs = json.loads(args) if isinstance(args, str) else dict(args)
                calls.append(Call(name, (), kwargs))
            else:
                raise CallParseError(f"not a call: {element!r}")
        return calls
    raise CallParseError(f"not a call list: {item!r}")


def decode_entry(result: list[list[Any]]) -> list[tuple[int, Call]]:
    """All turns of one task, flattened in emission order, each call with its turn index."""
    out: list[tuple[int, Call]] = []
    for turn, steps in enumerate(result):
        for item in steps:
            try:
                out.extend((turn, c) for c in decode_step(item))
            except (CallParseError, ValueError, TypeError):
                continue  # chatter or an undecodable step: not a call the environment ran
    return out


def model_name(path: Path) -> str:
    """BFCL lays results out as ``<model>/multi_turn/<file>`` (or ``<model>/<file>``)."""
    parent = path.parent
    return parent.parent.name if parent.name == "multi_turn" else parent.name


def read_result_file(path: Path) -> dict[str, list[tuple[int, Call]]]:
    entries: dict[str, list[tuple[int, Call]]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                entry = json.loads(line)
                entries[entry["id"]] = decode_entry(entry["result"])
    return entries


def category_of(task_id: str) -> str:
    """``multi_turn_miss_param_12`` -> ``miss_param``."""
    return task_id.removeprefix("multi_turn_").rsplit("_", 1)[0]


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
