"""The README's example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(capsys: object) -> None:
    text = README.read_text()
    section = text[text.index("## Example") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(code.group(1), str(README), "exec"), namespace)
    assert namespace["contacts"] == {}
