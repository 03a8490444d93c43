"""The demo under the standard OTEL_* variables: the spans go to the exporters they name, not
to the span file, and the demo says so and where to report them from (it used to exit 2, its
report step looking for a file never written). Runs in both venvs; needs no backend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_says_where_the_spans_went(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, "-m", "toolguard.demo", "--out", str(out), "--episodes", "2"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not out.exists()
    assert '"toolguard.trajectory.id": "demo-000"' in done.stdout  # the console exporter's
    assert "spans sent to the exporters OTEL_TRACES_EXPORTER='console' names" in done.stdout
    assert "(OTLP endpoint: http://127.0.0.1:9)" in done.stdout
    assert "toolguard report --phoenix" in done.stdout
    assert "error" not in done.stderr
