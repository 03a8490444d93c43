"""The README's quickstart runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quickstart_runs() -> None:
    text = README.read_text()
    section = text.split("## Quickstart", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "README has no python block under Quickstart"
    done = subprocess.run(
        [sys.executable, "-c", code.group(1)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "rejected (dependency)" in done.stdout


def test_readme_names_the_two_commands() -> None:
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in ci
