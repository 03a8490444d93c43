"""Load BFCL multi-turn tasks, ground truth and function docs from the installed package.

Call strings are parsed by ``toolguard.replay.bfcl.parse_call`` (``ast`` and
``ast.literal_eval``): BFCL's ground truth only holds literals, and anything else (a nested
call, a name) is refused rather than evaluated. ``Call``, ``CallParseError`` and
``parse_call`` live there (``toolguard replay bfcl`` reads result files with them) and are
re-exported here for the harness.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from benchmarks.bfcl import CATEGORIES
from toolguard.replay.bfcl import Call, CallParseError, parse_call

__all__ = [
    "Call",
    "CallParseError",
    "Task",
    "function_docs",
    "load_category",
    "load_tasks",
    "package_root",
    "parse_call",
]


@dataclass
class Task:
    id: str
    category: str
    questions: list[list[dict[str, Any]]]
    initial_config: dict[str, Any]
    involved_classes: list[str]
    ground_truth: list[list[Call]]
    excluded: frozenset[str] = frozenset()
    # turn index -> functions that only become available at that turn (miss_func)
    missed: dict[int, list[str]] = field(default_factory=dict)

    @property
    def long_context(self) -> bool:
        # BFCL switches the long-context scenario on by category name; so do we.
        return "long_context" in self.category

    def flat_calls(self) -> list[tuple[int, Call]]:
        return [(t, c) for t, turn in enumerate(self.ground_truth) for c in turn]


def package_root() -> Path:
    return Path(str(resources.files("bfcl_eval")))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@cache
def load_category(category: str) -> tuple[Task, ...]:
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; expected one of {CATEGORIES}")
    root = package_root() / "data"
    entries = _read_jsonl(root / f"BFCL_v4_multi_turn_{category}.json")
    answers = {
        a["id"]: a["ground_truth"]
        for a in _read_jsonl(root / "possible_answer" / f"BFCL_v4_multi_turn_{category}.json")
    }
    tasks = []
    for e in entries:
        gt = [[parse_call(s) for s in turn] for turn in answers[e["id"]]]
        tasks.append(
            Task(
                id=e["id"],
                category=category,
                questions=e["question"],
                initial_config=e.get("initial_config", {}),
                involved_classes=list(e["involved_classes"]),
                ground_truth=gt,
                excluded=frozenset(e.get("excluded_function", [])),
                missed={int(k): list(v) for k, v in e.get("missed_function", {}).items()},
            )
        )
    return tuple(tasks)


def load_tasks(categories: tuple[str, ...] = CATEGORIES, limit: int | None = None) -> list[Task]:
    out: list[Task] = []
    for cat in categories:
        out.extend(load_category(cat)[:limit])
    return out


@cache
def function_docs(class_name: str) -> dict[str, dict[str, Any]]:
    """name -> BFCL function doc for one backend class."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    path = package_root() / "data" / "multi_turn_func_doc"
    docs = _read_jsonl(path / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name])
    return {d["name"]: d for d in docs}
