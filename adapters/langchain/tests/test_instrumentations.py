"""With the LangChain instrumentations people use (issue 23), the run is one trace: the
trajectory's summary span, the guard's call spans and the instrumentation's own spans (its
model spans, whose tokens ``toolguard report --cost`` attributes by trace) share a trace id.

Traceloop's instrumentation makes its run spans current, so this holds by itself;
OpenInference's never attaches its spans, so the middleware opens the trajectory below its
root span. What remains (documented in the README): the instrumentation's own tool span is a
second span for an executed call, without the guard's attributes. Each instrumentation runs
in a process of its own (instrumented_run.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# name -> (module, distribution), in the order they run: Traceloop's last (it leaks context).
MODULES = {
    "openinference": (
        "openinference.instrumentation.langchain",
        "openinference-instrumentation-langchain",
    ),
    "traceloop": (
        "opentelemetry.instrumentation.langchain",
        "opentelemetry-instrumentation-langchain",
    ),
}


def test_the_run_is_one_trace() -> None:
    for module, distribution in MODULES.values():
        pytest.importorskip(module, reason=f"the adapter's [test] extra: {distribution}")
    here = Path(__file__).parent
    done = subprocess.run(
        [sys.executable, str(here / "instrumented_run.py"), *MODULES],
        capture_output=True,
        text=True,
        cwd=here,
    )
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout.splitlines()[-1])
    assert len(runs) == 4
    for name, run in runs.items():
        # One trace; the summary and two call spans are the guard's, the rest theirs.
        assert run["traces"] == 1, (name, run)
        assert run["ours"] == 3 and run["theirs"] > 0, (name, run)
        assert run["steps"] == [1, 2], (name, run)
