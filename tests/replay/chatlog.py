"""Builders of recorded runs for the replay tests: chat messages in the OpenAI shape, and a
replay's span file read back through the report's public functions.

A module of its own (not conftest.py) so that `from chatlog import ...` cannot pick up another
directory's conftest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import toolguard as tg


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def calls(*items: tuple[str, str, Any], text: str | None = None) -> dict[str, Any]:
    """An assistant message with tool calls (id, name, arguments as JSON text or a mapping)."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for cid, name, args in items
        ],
    }


def tool(call_id: str | None, content: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "tool",
        "content": content if isinstance(content, str) else json.dumps(content),
    }
    if call_id is not None:
        message["tool_call_id"] = call_id
    return message


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def write_jsonl(path: Path, rows: Sequence[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class Replayed:
    """A replay's span file read back: records by trajectory id and the report."""

    def __init__(self, out: Path, stats: Any) -> None:
        self.out = out
        self.stats = stats
        records, _ = tg.read_records([str(out)])
        self.records = {r.trajectory_id: r for r in records}
        assert all(not r.incomplete and not r.disagreements for r in records)

    def figures(self, cohort: str = "environment") -> dict[str, tuple[int, int]]:
        """run id -> (T, FED) of one cohort."""
        prefix = f"{cohort}/"
        return {
            tid.removeprefix(prefix): (r.length, r.fed)
            for tid, r in self.records.items()
            if tid.startswith(prefix)
        }

    def report(self, by: Sequence[str] = ("replay",)) -> dict[str, Any]:
        return dict(tg.build_report(list(self.records.values()), by=list(by)))

    def group(self, **labels: str) -> dict[str, Any]:
        for g in self.report(list(labels))["groups"]:
            if g["labels"] == labels:
                return dict(g)
        raise AssertionError(f"no group {labels}")
