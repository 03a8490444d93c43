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
PER_TRAJECTORY = 100  # 99 calls + 1 summary span

# The exporter is held on an event until the whole burst is queued, so the test never
# depends on how fast the SDK's export thread runs on a loaded machine: with the SDK's
# defaults the queue overflows every time, and the embedded default must keep every span.
_BURST_SCRIPT = textwrap.dedent("""
    import sys, threading, toolguard as tg
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter

    release = threading.Event()
    _export = FileSpanExporter.export

    def held_export(self, spans):
        release.wait()
        return _export(self, spans)

    FileSpanExporter.export = held_export
    mode, path, n, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if mode == "toolguard":
        provider = tg.setup_file_export(path)
    else:  # what a user would write from the exporter's own docs: SDK defaults
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(path)))
        trace.set_tracer_provider(provider)
    guard = tg.Guard()

    @guard.tool
    def ping(i: int) -> int:
        return i

    for t in range(n // per):
        with tg.trajectory(f"t{t}"):
            for i in range(per - 1):
                ping(i)
    release.set()
    # No explicit flush: what reaches the file is what the exit path delivers.
""")


def _read_spans(path: Path) -> list[dict[str, object]]:
    spans = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    attrs = {}
                    for a in span.get("attributes", []):
                        value = a["value"]
                        attrs[a["key"]] = value.get("stringValue", value.get("intValue"))
                    spans.append({"name": span["name"], **attrs})
    return spans


def _burst(tmp_path: Path, mode: str) -> list[dict[str, object]]:
    out = tmp_path / f"{mode}.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _BURST_SCRIPT, mode, str(out), str(BURST), str(PER_TRAJECTORY)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return _read_spans(out) if out.exists() else []


def test_sdk_defaults_drop_spans_and_the_embedded_default_does_not(tmp_path: Path) -> None:
    sdk = _burst(tmp_path, "sdk-defaults")
    # The measurement that motivated the deep queue: the SDK's 2,048-span queue overflows.
    assert len(sdk) < BURST, f"SDK defaults kept all {len(sdk)} spans with the exporter held"
    ours = _burst(tmp_path, "toolguard")
    calls = [
        (s["toolguard.trajectory.id"], int(s["toolguard.step"]))  # type: ignore[call-overload]
        for s in ours
        if s["name"] == "execute_tool ping"
    ]
    summaries = [s["toolguard.trajectory.id"] for s in ours if s["name"] == "toolguard.trajectory"]
    trajectories = BURST // PER_TRAJECTORY
    expected_calls = {
        (f"t{t}", step) for t in range(trajectories) for step in range(1, PER_TRAJECTORY)
    }
    # Identity, not only a count: each (trajectory, step) and each summary exactly once.
    assert len(calls) == len(expected_calls) and set(calls) == expected_calls
    assert sorted(summaries) == sorted(f"t{t}" for t in range(trajectories))


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


def _resource(path: Path) -> dict[str, str]:
    [line] = path.read_text().splitlines()
    [resource_spans] = json.loads(line)["resourceSpans"]
    return {a["key"]: a["value"]["stringValue"] for a in resource_spans["resource"]["attributes"]}


_ONE_SPAN = textwrap.dedent("""
    import sys, toolguard as tg
    tg.setup_file_export(sys.argv[1], service_name=sys.argv[2] or None)
    with tg.trajectory("env"):
        pass
""")


def test_the_resource_is_the_sdks_own_from_the_environment(tmp_path: Path) -> None:
    """OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME reach the file as the SDK reads them; an
    instance id set there is kept (before, ours replaced it), one is made only when none is."""

    def resource(service_name: str, **env: str) -> dict[str, str]:
        out = tmp_path / f"spans-{len(list(tmp_path.iterdir()))}.jsonl"
        done = subprocess.run(
            [sys.executable, "-c", _ONE_SPAN, str(out), service_name],
            capture_output=True,
            text=True,
            timeout=60,
            env={**_env(), **env},
        )
        assert done.returncode == 0, done.stderr
        return _resource(out)

    given = resource(
        "",
        OTEL_RESOURCE_ATTRIBUTES="service.instance.id=run-7,deployment=ci",
        OTEL_SERVICE_NAME="a",
    )
    assert (given["service.instance.id"], given["deployment"], given["service.name"]) == (
        "run-7",
        "ci",
        "a",
    )
    # An explicit service_name wins over the environment's, as before.
    assert resource("b", OTEL_SERVICE_NAME="a")["service.name"] == "b"
    made = [resource("")["service.instance.id"] for _ in range(2)]
    assert all(made) and made[0] != made[1]  # one per process: appended runs stay apart
