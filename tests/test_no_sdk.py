"""A guard installed without its extras: only pydantic, wrapt, jsonschema, regress and the
OpenTelemetry API. The SDK, the JSON file exporter, orjson and numpy are made unimportable in
a fresh interpreter (a finder first on ``sys.meta_path``), as they are after ``pip install
toolguard-otel``; the guard still works, its spans are no-ops, and whatever needs an extra
says which one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import toolguard

# The checkout (or site-packages) this test imported toolguard from: the subprocess must
# import the same one.
ROOT = Path(toolguard.__file__).resolve().parent.parent

BLOCKER = textwrap.dedent(
    """
    import importlib.abc
    import sys

    BLOCKED = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.json", "orjson", "numpy")

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    """
)


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOOLGUARD_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


GUARD = """
import toolguard as tg
from opentelemetry import trace

guard = tg.Guard()

@guard.tool(produces={"id": "item_id"})
def find(name: str) -> list[dict]:
    return [{"id": "i-1", "name": name}]

@guard.tool(refs={"item_id": "item_id"})
def drop(item_id: str) -> dict:
    return {"dropped": item_id}

with guard.trajectory("t-1", labels={"model": "none"}) as traj:
    bad = guard.call("drop", {"item_id": "made-up"})
    found = guard.call("find", {"name": "x"})
    good = guard.call("drop", {"item_id": found[0]["id"]})
    traj.success = True

assert isinstance(bad, tg.Rejection) and bad.cause == "dependency", bad
assert good == {"dropped": "i-1"}, good
assert (traj.length, traj.first_error_depth) == (3, 1)
# No SDK: the global provider is still the API's proxy, every span a no-op.
assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
assert not trace.get_tracer("t").start_span("s").is_recording()

# Every public name resolves; the report's and replay's are loaded lazily and need [report].
needs_report = []
for name in tg.__all__:
    try:
        getattr(tg, name)
    except ImportError as exc:
        assert "toolguard-otel[report]" in str(exc), (name, str(exc))
        needs_report.append(name)
assert "Guard" not in needs_report and "setup_file_export" not in needs_report
assert "build_report" in needs_report, needs_report

try:
    tg.setup_file_export("spans.jsonl")
except ImportError as exc:
    message = str(exc)
else:
    raise AssertionError("setup_file_export worked without the SDK")
assert "pip install 'toolguard-otel[export]'" in message, message
assert "pip install -e '.[export]'" in message, message
for blocked in ("opentelemetry.sdk", "opentelemetry.exporter", "orjson", "numpy"):
    assert not any(m == blocked or m.startswith(blocked + ".") for m in sys.modules), blocked
print("ok")
"""

CLI = """
import runpy
sys.argv = ["toolguard", *sys.argv[1:]]
runpy.run_module("toolguard", run_name="__main__")
"""


def test_a_guard_without_the_sdk_works_and_its_spans_are_no_ops(tmp_path: Path) -> None:
    done = _run(GUARD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert not (ROOT / "spans.jsonl").exists()


def test_the_report_command_without_its_extra_says_which_one(tmp_path: Path) -> None:
    spans = tmp_path / "x.jsonl"
    spans.write_text("")
    commands = (
        ["report", str(spans)],
        ["compare", str(spans), "--by", "m", "--a", "a", "--b", "b"],
        ["replay", "openai", str(spans), "--out", str(tmp_path / "out.jsonl")],
    )
    for command in commands:
        done = _run(CLI, *command)
        assert done.returncode == 2, (command, done.stderr)
        assert done.stdout == ""
        [line] = done.stderr.splitlines()  # one line, no traceback
        assert line.startswith("toolguard: error: "), line
        assert "pip install 'toolguard-otel[report]'" in line, line
