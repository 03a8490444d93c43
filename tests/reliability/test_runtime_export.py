"""The embedded export under failure: a hung exporter, a full queue, a full disk, /dev/full,
an OTLP endpoint over HTTP, a provider shut down mid-run. Each case runs in a subprocess
(a process sets its global tracer provider once); the exporter is held on events, never on
sleeps, and no assertion depends on timing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

import toolguard as tg

HEADER = textwrap.dedent("""
    import sys, threading, toolguard as tg
    from toolguard.runtime.telemetry.span_file import SpanFileExporter
    guard = tg.Guard()
    guard.register(lambda i: i, name="ping")

    def trajectories(n, per, prefix="t"):
        for t in range(n):
            with tg.trajectory(f"{prefix}{t}"):
                for i in range(per):
                    guard.call("ping", {"i": i})
""")


def run(script: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOOLGUARD_"))}
    return subprocess.run(
        [sys.executable, "-c", HEADER + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=300,  # a safety net for a hang, not a measurement
        env={**base, **(env or {})},
        cwd=cwd,
    )


def lost(stderr: str) -> int:
    found = re.search(r"toolguard: (\d+) span\(s\) were not written", stderr)
    return int(found.group(1)) if found else 0


def spans_in(path: Path) -> list[dict]:
    spans = []
    for line in path.read_text().splitlines():
        request = json.loads(line)  # every line is one whole export request
        for rs in request["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                spans.extend(ss["spans"])
    return spans


def test_a_hung_exporter_cannot_keep_the_process_alive(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    done = run(
        f"""
        never = threading.Event()
        SpanFileExporter.export = lambda self, spans: never.wait()  # hangs for ever
        tg.setup_file_export({str(out)!r})
        trajectories(5, 9)
        print("work done")
        """,
        env={"TOOLGUARD_EXIT_TIMEOUT": "0.5"},
    )
    assert done.returncode == 0, done.stderr
    assert "work done" in done.stdout
    assert lost(done.stderr) == 50  # 45 calls + 5 summaries, every one counted


def test_a_full_queue_waits_then_counts_what_a_stalled_exporter_loses(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    done = run(
        f"""
        release = threading.Event()
        real = SpanFileExporter.export
        def held(self, spans):
            release.wait()
            return real(self, spans)
        SpanFileExporter.export = held
        tg.setup_file_export({str(out)!r})
        trajectories(20, 24)  # 500 spans into a queue of 100
        release.set()
        """,
        env={
            "OTEL_BSP_MAX_QUEUE_SIZE": "100",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10",
            "TOOLGUARD_QUEUE_FULL_WAIT": "0.05",
        },
    )
    assert done.returncode == 0, done.stderr
    written = len(spans_in(out))
    assert written + lost(done.stderr) == 500  # nothing vanished uncounted
    assert written <= 100 + 10  # the queue's bound plus the batch held in export()
    assert "exporter is stalled" in done.stderr


def test_no_span_lost_while_the_exporter_keeps_up_with_a_small_queue(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    done = run(
        f"""
        tg.setup_file_export({str(out)!r})
        trajectories(20, 24)
        """,
        env={"OTEL_BSP_MAX_QUEUE_SIZE": "50", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10"},
    )
    assert done.returncode == 0, done.stderr
    assert len(spans_in(out)) == 500 and lost(done.stderr) == 0  # backpressure, no drops


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")
def test_a_full_disk_leaves_a_line_aligned_file_and_counts_the_loss(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    done = run(
        f"""
        import os, resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
        provider = tg.setup_file_export({str(out)!r})
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        trajectories(3, 5, "before")
        provider.force_flush()
        size = os.path.getsize({str(out)!r})
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 700, hard))  # the disk fills up
        for k in range(6):
            trajectories(1, 5, f"full{{k}}-")
            provider.force_flush()
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space returns
        trajectories(3, 5, "after")
        """
    )
    assert done.returncode == 0, done.stderr
    spans = spans_in(out)  # raises if any line were glued or cut
    assert len(spans) + lost(done.stderr) == 12 * 6
    assert lost(done.stderr) > 0
    # Said once per outage, whichever batches fit meanwhile: every outage ended (the last
    # batches are written) and each was said once, at its start.
    outages = done.stderr.count("works again")
    assert outages >= 1 and done.stderr.count("spans.jsonl failed (") == outages, done.stderr
    records, _ = tg.read_records([str(out)])  # the report reads the whole file
    ids = {r.trajectory_id for r in records}
    assert {"before0", "before2", "after0", "after2"} <= ids


def test_a_span_file_removed_mid_run_is_made_again_or_its_loss_counted(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "spans.jsonl"
    done = run(
        f"""
        import os, shutil
        provider = tg.setup_file_export({str(out)!r})
        trajectories(2, 4, "first")
        provider.force_flush()
        os.unlink({str(out)!r})  # log rotation, a cleanup job: a new file at the same path
        trajectories(2, 4, "second")
        provider.force_flush()
        shutil.copy({str(out)!r}, {str(tmp_path / "second.jsonl")!r})
        shutil.rmtree({str(folder)!r})  # the folder too: nothing can be written there
        trajectories(2, 4, "third")
        provider.force_flush()
        """
    )
    assert done.returncode == 0, done.stderr
    assert "was removed; writing a new one" in done.stderr
    assert "was removed and cannot be made again" in done.stderr
    assert lost(done.stderr) == 10  # the third batch: 2 x (4 calls + a summary)
    records, _ = tg.read_records([str(tmp_path / "second.jsonl")])  # the file made again
    assert sorted(r.trajectory_id for r in records) == ["second0", "second1"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_dev_full_loses_everything_loudly_and_the_program_still_runs() -> None:
    done = run(
        """
        tg.setup_file_export("/dev/full")
        trajectories(2, 4)
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert lost(done.stderr) == 10


def test_a_provider_shut_down_mid_run_is_reported(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    done = run(
        f"""
        provider = tg.setup_file_export({str(out)!r})
        trajectories(1, 3, "kept")
        provider.shutdown()
        trajectories(1, 3, "lost")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "after the tracer provider was shut down" in done.stderr
    assert lost(done.stderr) == 4
    assert len(spans_in(out)) == 4


class _Collector(BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []
    paths: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        type(self).bodies.append(self.rfile.read(length))
        type(self).paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


def test_otlp_over_http_protobuf_reaches_an_http_endpoint(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    _Collector.bodies, _Collector.paths = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = run(
            f"""
            tg.setup_file_export({str(tmp_path / "unused.jsonl")!r})
            trajectories(1, 19)
            """,
            env={
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
            },
        )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert set(_Collector.paths) == {"/v1/traces"}
    spans = 0
    for body in _Collector.bodies:
        request = ExportTraceServiceRequest.FromString(body)
        spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    assert spans == 20


def test_otlp_names_the_package_its_protocol_needs(tmp_path: Path) -> None:
    done = run(
        "tg.setup_file_export('x.jsonl')",
        env={"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        cwd=tmp_path,
    )
    if done.returncode == 0:
        pytest.skip("the gRPC exporter is installed here")
    assert "otlp_proto_grpc" in done.stderr and "opentelemetry-exporter-otlp-proto-grpc" in (
        done.stderr
    )


# The exit's own account of what it waited for: a hook registered before toolguard's runs
# after it (atexit is LIFO) and prints every flush wait asked of a span queue, so the test
# reads which waits the exit ran instead of timing it.
EXIT_WAITS = """
    import atexit
    from toolguard.runtime.telemetry.span_queue import SpanQueue
    waits = []
    real_flush = SpanQueue.force_flush
    def counted(self, timeout_millis=30_000):
        waits.append(timeout_millis)
        return real_flush(self, timeout_millis)
    SpanQueue.force_flush = counted
    atexit.register(lambda: print("exit waits (ms):", waits, file=sys.stderr, flush=True))
    """


def _exit_waits(stderr: str) -> list[int]:
    found = re.search(r"exit waits \(ms\): \[([\d, ]*)\]", stderr)
    assert found, stderr
    return [int(w) for w in found.group(1).split(",") if w.strip()]


def test_one_bound_for_the_whole_exit_on_a_hung_exporter(tmp_path: Path) -> None:
    """Before, the exit flush waited TOOLGUARD_EXIT_TIMEOUT and then the provider's own atexit
    shutdown waited its 30 s again on the same stuck export."""
    script = f"""
        never = threading.Event()
        SpanFileExporter.export = lambda self, spans: never.wait()  # hangs for ever
        tg.setup_file_export({str(tmp_path / "spans.jsonl")!r})
        trajectories(2, 3)
        """
    done = run(
        textwrap.dedent(EXIT_WAITS) + textwrap.dedent(script),
        env={"TOOLGUARD_EXIT_TIMEOUT": "1"},
    )
    assert done.returncode == 0, done.stderr
    waits = _exit_waits(done.stderr)
    assert waits and sum(waits) <= 1000, waits  # one wait, within the bound: not 1 s + 30 s
    assert lost(done.stderr) == 8  # 6 calls + 2 summaries, said before the process left
    assert "8 not written before exit" in done.stderr


def test_a_processor_added_to_our_provider_cannot_outlast_the_bound(tmp_path: Path) -> None:
    """A BatchSpanProcessor whose exporter never returns: its shutdown joins its worker for 30 s.
    The exit leaves it behind (its shutdown never returns, so never prints) and says so."""
    done = run(
        f"""
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
        never = threading.Event()
        class Stuck(SpanExporter):
            def export(self, spans):
                never.wait()
        class Watched(BatchSpanProcessor):
            def shutdown(self, *args, **kwargs):
                super().shutdown(*args, **kwargs)
                print("batch processor shut down", flush=True)
        provider = tg.setup_file_export({str(tmp_path / "spans.jsonl")!r})
        provider.add_span_processor(Watched(Stuck(), schedule_delay_millis=1))
        trajectories(1, 3)
        """,
        env={"TOOLGUARD_EXIT_TIMEOUT": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "batch processor shut down" not in done.stdout  # the exit did not wait for it
    assert (
        "toolguard: the exit did not finish within TOOLGUARD_EXIT_TIMEOUT (1 s) while shutting "
        "the tracer provider down (its other span processors); the process exits without "
        "waiting for it." in done.stderr
    )
    assert lost(done.stderr) == 0  # the file got every span
    assert len(spans_in(tmp_path / "spans.jsonl")) == 4


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_span_file_that_keeps_failing_is_logged_once_not_per_batch() -> None:
    done = run(
        """
        provider = tg.setup_file_export("/dev/full")
        for k in range(5):
            trajectories(1, 2, f"t{k}-")
            provider.force_flush()  # one failed write per batch
        """
    )
    assert done.returncode == 0, done.stderr
    assert lost(done.stderr) == 15
    assert done.stderr.count("/dev/full failed (") == 1, done.stderr
