"""A trajectory still open when the interpreter exits writes its summary (outcome unknown):
one open in a daemon thread, which the interpreter stops without unwinding its ``with``, and
one started and never ended. Each runs in a child process that exits while it is open."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def _spans(path: Path) -> list[dict[str, Any]]:
    return [
        span
        for line in path.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def _run(script: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


PRELUDE = """
import threading
import toolguard as tg
tg.setup_file_export({path!r})
guard = tg.Guard()

@guard.tool
def lookup(name: str) -> str:
    return name.upper()
"""


def test_a_daemon_threads_trajectory_is_ended_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    _run(
        PRELUDE.format(path=str(path))
        + """
called = threading.Event()

def worker() -> None:
    with guard.trajectory("daemon", labels={"m": "x"}):
        lookup(name="a")
        lookup(name="b")
        called.set()
        threading.Event().wait()  # never set: the interpreter exits with the `with` open

threading.Thread(target=worker, daemon=True).start()
assert called.wait(60)
"""
    )
    spans = _spans(path)
    summaries = [s for s in spans if s["name"] == "toolguard.trajectory"]
    assert len(summaries) == 1
    attrs = _attrs(summaries[0])
    assert attrs["toolguard.trajectory.id"] == "daemon"
    assert attrs["toolguard.trajectory.length"] == "2"  # OTLP JSON writes ints as strings
    assert attrs["toolguard.label.m"] == "x"
    assert "toolguard.trajectory.success" not in attrs  # the outcome is unknown
    assert sorted(s["name"] for s in spans if s is not summaries[0]) == ["execute_tool lookup"] * 2


def test_a_trajectory_started_and_never_ended_is_ended_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    _run(
        PRELUDE.format(path=str(path))
        + """
traj = guard.trajectory("forgotten").start()
with traj.activate():
    lookup(name="a")
traj.success = True  # what the user knew is kept
"""
    )
    summaries = [s for s in _spans(path) if s["name"] == "toolguard.trajectory"]
    assert len(summaries) == 1
    attrs = _attrs(summaries[0])
    assert attrs["toolguard.trajectory.length"] == "1"
    assert attrs["toolguard.trajectory.success"] is True


def test_a_trajectory_ended_before_exit_is_not_ended_again(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    _run(
        PRELUDE.format(path=str(path))
        + """
with guard.trajectory("done"):
    lookup(name="a")
kept = guard.trajectory("dropped").start()
kept.end()
"""
    )
    ids = [
        _attrs(s)["toolguard.trajectory.id"]
        for s in _spans(path)
        if s["name"] == "toolguard.trajectory"
    ]
    assert sorted(ids) == ["done", "dropped"]
