"""The README's quickstart runs as written, and so does the worked example of
docs/guarding-tools.md (the README's former quickstart, precondition included)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUARDING = ROOT / "docs" / "guarding-tools.md"


def _first_python_block(text: str, after: str) -> str:
    section = text.split(after, 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, f"no python block under {after!r}"
    return code.group(1)


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_quickstart_runs() -> None:
    code = _first_python_block(README.read_text(), "## Quickstart")
    assert "rejected (dependency)" in _run(code)


def test_guarding_tools_worked_example_runs() -> None:
    code = _first_python_block(GUARDING.read_text(), "## A worked example")
    assert "tg.Precondition(" in code
    assert "rejected (dependency)" in _run(code)


def test_readme_names_the_two_commands() -> None:
    text = README.read_text()
    blocks = "\n".join(re.findall(r"```sh\n(.*?)```", text, re.S))
    assert re.search(r"^make demo\b", blocks, re.M), "README: `make demo` in a sh block"
    assert re.search(r"^make test\b", blocks, re.M), "README: `make test` in a sh block"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
