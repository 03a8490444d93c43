"""Fixtures of the replay tests; the run builders live in chatlog.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from chatlog import Replayed

from toolguard.replay import replay_files


@pytest.fixture
def replay(tmp_path: Path) -> Any:
    """replay(format, files, **options) -> Replayed: the span file of a replay, read back."""

    def run(format: str, files: Sequence[Path], **options: Any) -> Replayed:
        out = tmp_path / "spans.jsonl"
        stats = replay_files(format, files, out, **options)
        return Replayed(out, stats)

    return run
