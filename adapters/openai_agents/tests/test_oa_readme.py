"""The README's example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agents import set_tracing_disabled

README = Path(__file__).parent.parent / "README.md"


def test_the_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert block is not None
    namespace: dict[str, object] = {}
    try:
        exec(compile(block.group(1), str(README), "exec"), namespace)
    finally:
        set_tracing_disabled(False)  # the example switches the SDK's tracing off globally

    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("Error: the call to `remove_contact` was rejected (dependency).")
    assert printed[1] == "Alex is removed."
    assert namespace["contacts"] == {}
