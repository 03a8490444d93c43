"""The backend tests stay out of the way of the main suite: collecting them imports nothing
of Phoenix (which runs as a subprocess), and without Phoenix they are skipped, saying how to
run them. Runs in both venvs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from phoenix_server import PHOENIX_MISSING, SKIP_REASON

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# `-p no:phoenix`: arize-phoenix-client's own pytest plugin (in .venv-backends) imports phoenix
# at start-up whatever is collected; make test-backends switches it off the same way.
_PROBE = """
import sys, pytest
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:phoenix",
                    sys.argv[1]])
loaded = sorted(m for m in sys.modules if m == "phoenix" or m.startswith("phoenix."))
print("PHOENIX MODULES:", loaded)
sys.exit(code)
"""


def test_collecting_the_backend_tests_imports_no_phoenix() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(HERE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_phoenix_roundtrip.py::test_every_span_arrives_exactly_once" in done.stdout
    assert "PHOENIX MODULES: []" in done.stdout


def test_without_phoenix_the_round_trip_is_skipped_with_its_reason() -> None:
    if not PHOENIX_MISSING:
        pytest.skip("Phoenix is installed in this venv: the round trip runs instead of skipping")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         str(HERE / "test_phoenix_roundtrip.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 8 and all(line.endswith(f": {SKIP_REASON}") for line in skipped)
    assert done.stdout.splitlines()[-1].startswith("8 skipped")
