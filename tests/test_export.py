"""The embedded default export loses no span where the SDK's defaults drop them.

Each case runs in a subprocess: OpenTelemetry lets a process set its global provider once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BURST = 20_000

_BURST_SCRIPT = textwrap.dedent("""
    import sys, toolguard as tg
    from opentelemetry import trace
    mode, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "toolguard":
        provider = tg.setup_file_export(path)
    else:  # what a user would write from the exporter's own docs: SDK defaults
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(path)))
        trace.set_tracer_provider(provider)
    guard = tg.Guard()

    @guard.tool
    def ping(i: int) -> int:
        return i

    per = 100
    for t in range(n // per):
        with tg.trajectory(f"t{t}"):
            for i in range(per - 1):
                ping(i)
    # No explicit flush: what reaches the file is what the exit path delivers.
""")


def _count_spans(path: Path) -> int:
    total = 0
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                total += len(ss["spans"])
    return total


def _burst(tmp_path: Path, mode: str) -> int:
    out = tmp_path / f"{mode}.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _BURST_SCRIPT, mode, str(out), str(BURST)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return _count_spans(out)


def test_sdk_defaults_drop_spans_and_the_embedded_default_does_not(tmp_path: Path) -> None:
    sdk = _burst(tmp_path, "sdk-defaults")
    ours = _burst(tmp_path, "toolguard")
    assert ours == BURST  # 99 calls + 1 summary per trajectory
    # The measurement that motivated the deep queue: the SDK's 2,048-span queue overflows.
    assert sdk < BURST, f"SDK defaults kept all {sdk} spans; the burst is too small to measure"


def test_otel_traces_exporter_env_is_honoured(tmp_path: Path) -> None:
    out = tmp_path / "unused.jsonl"
    script = textwrap.dedent("""
        import sys, toolguard as tg
        tg.setup_file_export(sys.argv[1])
        guard = tg.Guard()
        guard.register(lambda x: x, name="echo")
        with tg.trajectory("env"):
            guard.call("echo", {"x": 1})
    """)
    done = subprocess.run(
        [sys.executable, "-c", script, str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**_env(), "OTEL_TRACES_EXPORTER": "console"},
    )
    assert done.returncode == 0, done.stderr
    assert not out.exists()  # the console exporter was used instead of the file
    assert '"name": "execute_tool echo"' in done.stdout


def test_unknown_exporter_name_is_a_clear_error(tmp_path: Path) -> None:
    script = "import toolguard as tg; tg.setup_file_export('x.jsonl')"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**_env(), "OTEL_TRACES_EXPORTER": "nosuch"},
    )
    assert done.returncode != 0
    assert "OTEL_TRACES_EXPORTER names 'nosuch'" in done.stderr


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


@pytest.mark.parametrize("bad", ["", "   "])
def test_blank_path_rejected(bad: str) -> None:
    # An empty path would silently write next to the process's cwd under a blank name.
    done = subprocess.run(
        [sys.executable, "-c", f"import toolguard as tg; tg.setup_file_export({bad!r})"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "path" in done.stderr
