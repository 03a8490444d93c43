"""docs/fork-and-plans.md: its opening example runs as written and prints what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "fork-and-plans.md"


def test_the_opening_example_runs() -> None:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert code is not None, "docs/fork-and-plans.md has no python block"
    done = subprocess.run(
        [sys.executable, "-c", code.group(1)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "NotADirectoryError: cd: /tmp: no such directory" in lines[0]
    assert lines[0].startswith("Error: the call to `cd` was rejected (state_consistency).")
    assert lines[1] == "2 state_consistency"
    assert lines[2].startswith("steps[2] (`mkdir`) would fail (state_consistency):")
    assert "FileExistsError: mkdir: /tmp: exists" in lines[2]
