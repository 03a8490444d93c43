"""Guarded trajectories -> the standard OTLP/HTTP protobuf exporter -> a real Arize Phoenix ->
its REST span export -> compared with what the same tracer provider captured in memory, span by
span and attribute by attribute, then reported on both ways.

The exporter is configured only by OTEL_* variables. Phoenix runs as a subprocess on free
ports (phoenix_server.py). Needs arize-phoenix: `make test-backends` installs it into its own
venv (.venv-backends); in the main venv these tests are skipped.

With TOOLGUARD_BACKENDS_SUMMARY=FILE the comparison's counts are written to FILE (the make
target prints them); with TOOLGUARD_CAPTURE_FIXTURES=1 the export Phoenix answered and the
original spans are saved as tests/data/phoenix-export.jsonl and tests/data/phoenix-original.jsonl
(the reader's fixtures in the main suite).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from backend_workload import run_workload
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from otlp_retry import EXPORT_TIMEOUT_S, FLUSH_TIMEOUT_MS, Retrying
from phoenix_server import PHOENIX_MISSING, SKIP_REASON, PhoenixServer, running_phoenix

from toolguard import _contract as A
from toolguard._cli import main as cli
from toolguard.report.build import build_report
from toolguard.report.phoenix import iter_phoenix_pages, spans_url
from toolguard.report.read import read_phoenix, read_records
from toolguard.report.reader import ReadStats
from toolguard.runtime.telemetry.span_file import SpanFileExporter

pytestmark = pytest.mark.skipif(PHOENIX_MISSING, reason=SKIP_REASON)

PROJECT = "toolguard-roundtrip"
PAGE_SIZE = 25  # small pages, so the pull follows Phoenix's cursor several times
INGEST_TIMEOUT_S = 120.0
DATA = Path(__file__).resolve().parents[1] / "data"
OURS = ("toolguard.", "gen_ai.", "error.type")
_KIND_NAMES = {
    SpanKind.INTERNAL: "SPAN_KIND_INTERNAL",
    SpanKind.SERVER: "SPAN_KIND_SERVER",
    SpanKind.CLIENT: "SPAN_KIND_CLIENT",
    SpanKind.PRODUCER: "SPAN_KIND_PRODUCER",
    SpanKind.CONSUMER: "SPAN_KIND_CONSUMER",
}
_STATUS_CODES = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


@dataclass
class RoundTrip:
    server: PhoenixServer
    sent: list[ReadableSpan]  # what the provider's in-memory exporter captured
    answered: list[dict[str, Any]]  # Phoenix's spans, as its REST API answered them
    raw_pages: list[bytes]  # the answer bodies, page by page
    original: Path  # the in-memory spans as OTLP JSON Lines (the file export's format)
    timings: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    started = time.monotonic()
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        _TIMINGS["phoenix_start_s"] = time.monotonic() - started
        yield server


_TIMINGS: dict[str, float] = {}


def _raw_pages(url: str, project: str, page_size: int) -> list[bytes]:
    """The export, page by page, as Phoenix's bytes: a second pager, independent of ours."""
    pages, cursor = [], None
    while True:
        query = {"limit": page_size} | ({"cursor": cursor} if cursor else {})
        page_url = f"{spans_url(url, project)}?{urllib.parse.urlencode(query)}"
        with urllib.request.urlopen(page_url) as answer:
            body = answer.read()
        pages.append(body)
        cursor = json.loads(body)["next_cursor"]
        if cursor is None:
            return pages


def _wait_for(url: str, project: str, count: int) -> list[dict[str, Any]]:
    """Phoenix inserts what it receives in batches: poll until ``count`` spans are there."""
    deadline = time.monotonic() + INGEST_TIMEOUT_S
    seen = 0
    while time.monotonic() < deadline:
        try:
            spans = [
                s
                for page, _ in iter_phoenix_pages(url, project, ReadStats(), page_size=PAGE_SIZE)
                for s in page["data"]
            ]
        except Exception as exc:  # the project appears with its first span
            if "404" not in str(exc):
                raise
            spans = []
        seen = len(spans)
        if seen >= count:
            return spans
        time.sleep(0.5)
    pytest.fail(f"Phoenix at {url} holds {seen} of the {count} spans sent ({INGEST_TIMEOUT_S:g} s)")


@pytest.fixture(scope="module")
def round_trip(phoenix: PhoenixServer, tmp_path_factory: pytest.TempPathFactory) -> RoundTrip:
    memory = InMemorySpanExporter()
    with pytest.MonkeyPatch.context() as env:
        # The standard variables only: the exporter and the resource read them themselves.
        env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url)  # the exporter adds /v1/traces
        env.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        env.setenv("OTEL_SERVICE_NAME", "toolguard-roundtrip")
        env.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={PROJECT}")
        provider = TracerProvider(resource=Resource.create())
        provider.add_span_processor(SimpleSpanProcessor(memory))
        # Each request may take a minute, and a failed batch is sent again (otlp_retry.py).
        exporter = Retrying(OTLPSpanExporter(timeout=EXPORT_TIMEOUT_S))
        provider.add_span_processor(
            BatchSpanProcessor(exporter, export_timeout_millis=EXPORT_TIMEOUT_S * 1000 * 4)
        )
        started = time.monotonic()
        run_workload(provider)
        assert provider.force_flush(FLUSH_TIMEOUT_MS), (
            f"the OTLP exporter did not flush within {FLUSH_TIMEOUT_MS / 1000:g} s"
        )
        provider.shutdown()
    assert exporter.dropped == 0, f"{exporter.dropped} spans not accepted after retries"
    sent = list(memory.get_finished_spans())
    answered = _wait_for(phoenix.url, PROJECT, len(sent))
    _TIMINGS["export_and_ingest_s"] = time.monotonic() - started
    original = tmp_path_factory.mktemp("original") / "original.jsonl"
    SpanFileExporter(original).export(sent)
    pages = _raw_pages(phoenix.url, PROJECT, 40)
    if os.environ.get("TOOLGUARD_CAPTURE_FIXTURES") == "1":
        lines = b"".join(p.rstrip(b"\n") + b"\n" for p in pages)
        (DATA / "phoenix-export.jsonl").write_bytes(lines)
        (DATA / "phoenix-original.jsonl").write_bytes(original.read_bytes())
    return RoundTrip(phoenix, sent, answered, pages, original, dict(_TIMINGS))


def _hex(n: int, width: int) -> str:
    return f"{n:0{width}x}"


def _sent_value(v: Any) -> Any:
    return tuple(v) if isinstance(v, list | tuple) else v


def _answered_value(v: dict[str, Any]) -> Any:
    """Phoenix's AnyValue as a Python value of the type it carries (an int sent as a decimal
    string would come back a str, and compare unequal)."""
    present = {k: x for k, x in v.items() if x is not None}
    if "array_value" in present:
        return tuple(_answered_value(x) for x in present["array_value"].get("values") or ())
    if len(present) != 1:
        return ("<not one value>", present)
    return next(iter(present.values()))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@dataclass
class Comparison:
    spans: int = 0
    attributes: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    differences: list[str] = field(default_factory=list)
    kind_changed: list[str] = field(default_factory=list)
    added_keys: Counter[str] = field(default_factory=Counter)
    max_time_shift_ns: int = 0


def _compare(sent: list[ReadableSpan], answered: list[dict[str, Any]]) -> Comparison:
    out = Comparison()
    by_id = {(s["trace_id"], s["span_id"]): s for s in answered}
    for span in sent:
        ctx = span.get_span_context()
        assert ctx is not None
        key = (_hex(ctx.trace_id, 32), _hex(ctx.span_id, 16))
        got = by_id[key]
        where = f"{span.name} {key[1]}"
        out.spans += 1
        parent = _hex(span.parent.span_id, 16) if span.parent is not None else None
        if got["name"] != span.name:
            out.differences.append(f"{where}: name {got['name']!r}")
        if got["parent_span_id"] != parent:
            out.differences.append(f"{where}: parent {got['parent_span_id']} != {parent}")
        code, message = _STATUS_CODES[span.status.status_code], span.status.description or None
        if got["status"] != {"code": code, "message": message}:
            out.differences.append(f"{where}: status {got['status']} != {code} {message!r}")
        if got["kind"] != _KIND_NAMES[span.kind]:
            out.kind_changed.append(f"{where}: {_KIND_NAMES[span.kind]} -> {got['kind']}")
        for ours, theirs in (
            (span.start_time, got["start_time_unix_nano"]),
            (span.end_time, got["end_time_unix_nano"]),
        ):
            assert ours is not None
            out.max_time_shift_ns = max(out.max_time_shift_ns, abs(int(theirs) - ours))
        answered_attrs = {a["key"]: _answered_value(a["value"]) for a in got["attributes"]}
        sent_attrs = {k: _sent_value(v) for k, v in (span.attributes or {}).items()}
        for k, v in sent_attrs.items():
            if not k.startswith(OURS):
                continue
            out.attributes += 1
            out.by_type[type(v).__name__] += 1
            if k not in answered_attrs:
                out.differences.append(f"{where}: {k} missing")
            elif not _same(v, answered_attrs[k]):
                theirs = answered_attrs[k]
                out.differences.append(
                    f"{where}: {k} sent {v!r} ({type(v).__name__}), answered {theirs!r} "
                    f"({type(theirs).__name__})"
                )
        for k in answered_attrs.keys() - sent_attrs.keys():
            if k.startswith(OURS):
                out.differences.append(f"{where}: {k} answered but never sent")
            else:
                out.added_keys[k] += 1
    return out


@pytest.fixture(scope="module")
def comparison(round_trip: RoundTrip) -> Comparison:
    result = _compare(round_trip.sent, round_trip.answered)
    summary_path = os.environ.get("TOOLGUARD_BACKENDS_SUMMARY")
    if summary_path:
        Path(summary_path).parent.mkdir(parents=True, exist_ok=True)
        Path(summary_path).write_text(
            json.dumps(
                {
                    "spans_compared": result.spans,
                    "attributes_compared": result.attributes,
                    "attributes_by_type": dict(result.by_type),
                    "differences": result.differences,
                    "kind_changed": len(result.kind_changed),
                    "kind_changed_examples": result.kind_changed[:3],
                    "attributes_phoenix_added": dict(sorted(result.added_keys.items())),
                    "max_time_shift_ns": result.max_time_shift_ns,
                    "pages": len(round_trip.raw_pages),
                    **{k: round(v, 2) for k, v in round_trip.timings.items()},
                },
                indent=2,
            )
            + "\n"
        )
    return result


def test_every_span_arrives_exactly_once(round_trip: RoundTrip) -> None:
    ids = [(s["trace_id"], s["span_id"]) for s in round_trip.answered]
    assert len(ids) == len(set(ids)) == len(round_trip.sent)
    summaries = [s for s in round_trip.answered if s["name"] == A.SUMMARY_SPAN_NAME]
    sent_summaries = [s for s in round_trip.sent if s.name == A.SUMMARY_SPAN_NAME]
    assert len(summaries) == len(sent_summaries) == 32  # 30 demo episodes and 2 corners


def test_names_ids_parents_and_status_survive(comparison: Comparison) -> None:
    assert comparison.spans > 100
    assert [d for d in comparison.differences if ": name " in d or ": parent " in d] == []
    assert [d for d in comparison.differences if ": status " in d] == []


def test_every_toolguard_and_gen_ai_attribute_keeps_its_value_and_type(
    comparison: Comparison,
) -> None:
    assert comparison.attributes > 1000
    # str, int, bool, float and string arrays were all sent...
    assert set(comparison.by_type) == {"str", "int", "bool", "float", "tuple"}
    # ...and every one came back the same, with the same type.
    assert comparison.differences == []


def test_what_phoenix_changes_is_known(comparison: Comparison) -> None:
    """Phoenix keeps no OpenTelemetry span kind: every span comes back SPAN_KIND_INTERNAL (the
    default of its export model). Ours are INTERNAL, so only the framework's CLIENT spans
    change; no figure of the report depends on a kind. Its timestamps are microseconds read
    back through a float. It adds OpenInference attributes of its own, none in our keys."""
    assert comparison.kind_changed, "Phoenix kept the CLIENT kind: update docs/backends.md"
    assert all("SPAN_KIND_CLIENT -> SPAN_KIND_INTERNAL" in d for d in comparison.kind_changed)
    assert all(s.startswith("chat scripted") for s in comparison.kind_changed)
    assert comparison.max_time_shift_ns < 2_000
    assert not any(k.startswith(OURS) for k in comparison.added_keys)


def test_report_from_phoenix_equals_report_from_the_file(round_trip: RoundTrip) -> None:
    url = round_trip.server.url
    pulled, stats = read_phoenix(url, PROJECT, page_size=PAGE_SIZE)
    filed, _ = read_records([str(round_trip.original)])
    assert stats.spans == len(round_trip.sent)
    assert stats.lines == -(-len(round_trip.sent) // PAGE_SIZE)  # pages read
    assert pulled == filed
    by = ["method"]
    assert build_report(pulled, by=by) == build_report(filed, by=by)


def test_cli_report_from_phoenix_equals_the_file(round_trip: RoundTrip) -> None:
    def run(*args: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli(["report", *args, "--by", "model,method", "--format", "json"]) == 0
        return out.getvalue()

    from_phoenix = run("--phoenix", round_trip.server.url, "--project", PROJECT)
    assert from_phoenix == run(str(round_trip.original))
    assert json.loads(from_phoenix)["overall"]["n"] == 32


def test_saved_export_reads_like_the_original(round_trip: RoundTrip, tmp_path: Path) -> None:
    saved = tmp_path / "export.jsonl"
    saved.write_bytes(b"\n".join(round_trip.raw_pages) + b"\n")
    from_saved, stats = read_records([str(saved)])
    assert stats.lines == len(round_trip.raw_pages) > 1
    assert from_saved == read_records([str(round_trip.original)])[0]


def test_demo_exported_by_the_environment_alone(phoenix: PhoenixServer, tmp_path: Path) -> None:
    """docs/report.md's OTLP path: the demo, untouched, with OTEL_TRACES_EXPORTER=otlp sends its
    spans to Phoenix; its report from Phoenix equals the report of the same run to a file."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    to_phoenix = clean | {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
        "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=toolguard-demo",
    }
    demo = [sys.executable, "-m", "toolguard.demo", "--episodes", "20", "--no-report", "--out"]
    not_written = tmp_path / "not-written.jsonl"
    for out, env in ((not_written, to_phoenix), (tmp_path / "demo.jsonl", clean)):
        done = subprocess.run(
            [*demo, str(out)], env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
    assert not not_written.exists()  # the OTLP exporter replaced the file
    filed, stats = read_records([str(tmp_path / "demo.jsonl")])
    _wait_for(phoenix.url, "toolguard-demo", stats.spans)
    pulled, _ = read_phoenix(phoenix.url, "toolguard-demo")
    assert len(pulled) == len(filed) >= 20  # the demo runs 20 episodes (per agent loop)
    assert build_report(pulled, by=["method"]) == build_report(filed, by=["method"])
