"""`toolguard infer --format spans` (and its alias `mcp`) on span files a real guard wrote
with record_content=True through the core's span file, and the warning when it did not."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import toolguard as tg
from toolguard.__main__ import main
from toolguard.infer.spans import SpanRead, span_runs
from toolguard.replay.model import Turn
from toolguard.runtime.telemetry.span_file import SpanFileExporter


def _record(path: Path, *, record_content: bool = True, runs: int = 6) -> None:
    """Runs of a small contacts app through a guard in log mode, spans to ``path``: each
    run searches, removes the id found, then tries an id nobody produced (the app raises)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SpanFileExporter(path)))
    guard = tg.Guard(mode="log", record_content=record_content, tracer_provider=provider)
    contacts: dict[str, str] = {}

    @guard.tool
    def search_contact(name: str) -> dict[str, list[dict[str, str]]]:
        cid = contacts.setdefault(name, f"id_{1000 + len(contacts)}")
        return {"contacts": [{"id": cid, "name": name}]}

    @guard.tool
    def remove_contact(contact_id: str) -> dict[str, bool]:
        if contact_id not in contacts.values():
            raise KeyError("no such contact")
        return {"removed": True}

    for i in range(runs):
        with guard.trajectory(f"run{i}", labels={"task": f"task{i}"}):
            found = search_contact(f"Person{i}")
            remove_contact(found["contacts"][0]["id"])
            with pytest.raises(KeyError):
                remove_contact(f"id_made_up_{i}")
    provider.shutdown()


def test_runs_from_a_guards_span_file(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    _record(path)
    read = SpanRead()
    runs = list(span_runs(path, read))
    assert read.warnings == []
    assert [r.id for r in runs] == [f"run{i}" for i in range(6)]
    first = runs[0]
    assert first.task == "task0" and first.success is None
    calls = [c for e in first.events if isinstance(e, Turn) for c in e.calls]
    assert [c.name for c in calls] == ["search_contact", "remove_contact", "remove_contact"]
    assert calls[0].arguments == {"name": "Person0"}
    assert calls[0].answer is not None and not calls[0].answer.error
    assert calls[0].answer.result == {"contacts": [{"id": "id_1000", "name": "Person0"}]}
    assert calls[1].answer is not None and not calls[1].answer.error
    assert calls[2].answer is not None and calls[2].answer.error  # the app raised


def test_infer_from_spans_finds_the_id_passing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spans.jsonl"
    _record(path)
    out = tmp_path / "c.toml"
    assert main(["infer", str(path), "--format", "spans", "--out", str(out)]) == 0
    contract = tg.load_contract(out)
    assert contract.tools["remove_contact"].refs == {"contact_id": "contact_id"}
    assert contract.tools["search_contact"].produces == {"contacts[].id": "contact_id"}
    # The rejected calls are no evidence: 6 of 6 accepted values pass.
    assert "share 1.0000 (6/6 values)" in out.read_text()
    assert "warning" not in capsys.readouterr().err
    again = tmp_path / "mcp.toml"
    assert main(["infer", str(path), "--format", "mcp", "--out", str(again)]) == 0
    assert again.read_text() == out.read_text()


def test_a_span_file_without_recorded_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bare.jsonl"
    _record(path, record_content=False)
    out = tmp_path / "c.toml"
    assert main(["infer", str(path), "--format", "spans", "--out", str(out)]) == 0
    assert tomllib.loads(out.read_text()).get("tools", {}) == {}
    err = capsys.readouterr().err
    assert f"{path}: no call span holds recorded arguments or results" in err
    assert "record_content=True" in err and "Traceback" not in err


def test_a_file_that_is_not_a_span_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"messages": []}) + "\n")
    out = tmp_path / "c.toml"
    assert main(["infer", str(path), "--format", "spans", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"{path}:1: not an OTLP trace export" in err and "Traceback" not in err


def test_a_blocked_call_never_reached_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "blocked.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SpanFileExporter(path)))
    guard = tg.Guard(record_content=True, tracer_provider=provider)  # block mode

    @guard.tool(refs={"contact_id": "contact"})
    def remove_contact(contact_id: str) -> dict[str, bool]:
        return {"removed": True}

    with guard.trajectory("t0"), pytest.raises(tg.ToolCallRejected):
        remove_contact("id_never_produced")
    provider.shutdown()
    (only,) = span_runs(path)
    (event,) = only.events
    assert isinstance(event, Turn)
    call = event.calls[0]
    assert call.arguments == {"contact_id": "id_never_produced"} and call.answer is None


def test_a_logged_flag_then_rejected_by_the_environment_is_a_rejection(tmp_path: Path) -> None:
    """Recorded under a contract in log mode (`mcp-proxy --record --contract`): the span's
    cause is the logged dependency failure, the environment's error is among failed_checks."""
    path = tmp_path / "logged.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SpanFileExporter(path)))
    guard = tg.Guard(mode="log", record_content=True, tracer_provider=provider)

    @guard.tool(refs={"contact_id": "contact"})
    def remove_contact(contact_id: str) -> dict[str, Any]:
        # An error result, as an MCP server's isError.
        if contact_id.startswith("id_made_up"):
            return {"error": "no such contact"}
        return {"removed": True}

    with guard.trajectory("t0"):
        remove_contact("id_made_up_1")
        remove_contact("id_never_produced")  # flagged and logged, accepted
    provider.shutdown()
    text = path.read_text()
    assert '"dependency"' in text and "state.error_result" in text
    (only,) = span_runs(path)
    rejected, accepted = (c for e in only.events if isinstance(e, Turn) for c in e.calls)
    assert rejected.answer is not None and rejected.answer.error
    assert accepted.answer is not None and not accepted.answer.error


def test_content_cut_at_the_recording_limit_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SpanFileExporter(path)))
    guard = tg.Guard(mode="log", record_content=True, tracer_provider=provider)

    @guard.tool
    def search(name: str) -> dict[str, str]:
        return {"text": "x" * 10_000}

    with guard.trajectory("t0"):
        search("Ann")
    provider.shutdown()
    read = SpanRead()
    (only,) = span_runs(path, read)
    call = next(c for e in only.events if isinstance(e, Turn) for c in e.calls)
    assert call.arguments == {"name": "Ann"}
    assert call.answer is not None and isinstance(call.answer.result, str)
    assert read.warnings == [
        f"{path}: 1 call span(s) hold arguments or a result cut at the recording limit "
        "(4,096 characters): cut arguments are not read, a cut result is text"
    ]
