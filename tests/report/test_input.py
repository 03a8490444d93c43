"""Input handling: malformed lines with file and line, --skip-invalid, gzip, stdin, globs,
empty input."""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
from pathlib import Path

import pytest
from spanfiles import Writer, call, export, summary, trajectory

from toolguard import _contract as A
from toolguard._errors import ToolGuardError
from toolguard.report.build import build_report, read_warnings
from toolguard.report.read import read_records
from toolguard.report.reader import ReportInputError

GOOD = export(*trajectory("a", [True, "schema"], True))


def _without_fed() -> dict:
    s = summary("x", 1, 2)
    s["attributes"] = [a for a in s["attributes"] if a["key"] != A.TRAJECTORY_FED]
    return s


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "a JSON list, not a trace export"),
        ('{"resourceMetrics": []}', "metrics export, not a trace export"),
        ('{"foo": 1}', "without 'resourceSpans'"),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [{"value": 1}]}]}]}]}',
            "not a well-formed trace export",
        ),
        # a string where the spans go: not read character by character as spans
        ('{"resourceSpans": [{"scopeSpans": [{"spans": "abc"}]}]}', "spans is a str, not a list"),
        (json.dumps(export(call("x", "two"))), "toolguard.step is not an integer"),  # type: ignore[arg-type]
        (json.dumps(export(call("x", 0))), "toolguard.step must be >= 1"),
        (json.dumps(export(_without_fed())), "lacks toolguard.trajectory.first_error_depth"),
    ],
)
def test_bad_line_names_file_line_and_reason(write_lines: Writer, bad: str, why: str) -> None:
    path = write_lines([GOOD, "", bad, GOOD])
    with pytest.raises(ReportInputError, match=re.escape(why)) as info:
        read_records([str(path)])
    assert str(info.value).startswith(f"{path}:3: ")
    assert isinstance(info.value, ToolGuardError)


def test_skip_invalid_counts_and_points_at_the_first(write_lines: Writer) -> None:
    other = export(*trajectory("b", [True], False))
    path = write_lines([GOOD, "garbage", other, "[]", json.dumps(export(call("c", -1)))])
    records, stats = read_records([str(path)], skip_invalid=True)
    assert [r.trajectory_id for r in records] == ["a", "b"]
    assert stats.skipped == 3
    assert stats.first_skipped is not None and stats.first_skipped.startswith(f"{path}:2: ")


def test_skip_invalid_drops_only_the_bad_span_of_a_line(write_lines: Writer) -> None:
    # One export batch (a line) of many good spans and one bad one: the good spans are read
    # as if the bad one had never been written, and the bad one is counted and named.
    spans = [*trajectory("b", [True, "dependency", True], True), *trajectory("c", [], False)]
    bad = call("half", "x")  # type: ignore[arg-type]
    path = write_lines([GOOD, export(*spans[:2], bad, *spans[2:]), export(call("d", 1))])
    records, stats = read_records([str(path)], skip_invalid=True)
    clean = write_lines([GOOD, export(*spans), export(call("d", 1))], "clean.jsonl")
    assert records == read_records([str(clean)])[0]
    assert [r.trajectory_id for r in records] == ["a", "b", "c", "d"]
    assert stats.skipped == 1 and stats.skipped_spans == 1
    assert read_warnings(stats) == [
        f"1 invalid spans skipped (the other spans of their lines were read); the first: "
        f"{path}:2: span 3: toolguard.step is not an integer: {{'stringValue': 'x'}}"
    ]


def test_skipped_spans_and_lines_are_counted_apart(write_lines: Writer) -> None:
    broken = {"traceId": "1", "spanId": "2", "attributes": "not a list"}
    lines = [GOOD, "garbage", export(call("b", 1), broken), export(call("c", 0), call("c", 1))]
    path = write_lines(lines)
    records, stats = read_records([str(path)], skip_invalid=True, cost=True)
    assert [r.trajectory_id for r in records] == ["a", "b", "c"]
    assert stats.skipped == 3 and stats.skipped_spans == 2
    warnings = read_warnings(stats)
    assert warnings[0].startswith(f"1 invalid input lines skipped; the first: {path}:2: ")
    assert warnings[1].startswith(
        "2 invalid spans skipped (the other spans of their lines were read); the first: "
        f"{path}:3: span 2: "
    )
    # Without skip_invalid the first bad span still stops the read, naming its line.
    with pytest.raises(ReportInputError, match=f"^{re.escape(str(path))}:2: "):
        read_records([str(path)])


def test_gzip_file(write_lines: Writer) -> None:
    plain = read_records([str(write_lines([GOOD]))])[0]
    zipped = read_records([str(write_lines([GOOD], "spans.jsonl.gz"))])[0]
    assert plain == zipped and len(zipped) == 1


def test_corrupt_gzip_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(gzip.compress(b'{"resourceSpans": []}\n' * 50)[:40])
    with pytest.raises(ReportInputError, match=r"bad\.jsonl\.gz"):
        read_records([str(bad)])


@pytest.mark.parametrize("compress", [False, True])
def test_stdin(monkeypatch: pytest.MonkeyPatch, compress: bool) -> None:
    data = (json.dumps(GOOD) + "\n").encode()
    raw = io.BufferedReader(io.BytesIO(gzip.compress(data) if compress else data))  # type: ignore[arg-type]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(raw))
    records, stats = read_records(["-"])
    assert len(records) == 1 and stats.files == ["<stdin>"]


def test_globs_are_expanded_and_sorted(write_lines: Writer, tmp_path: Path) -> None:
    write_lines([export(*trajectory("b", [True]))], "run-2.jsonl")
    write_lines([export(*trajectory("a", [True]))], "run-1.jsonl")
    records, stats = read_records([str(tmp_path / "run-*.jsonl")])
    assert [r.trajectory_id for r in records] == ["a", "b"]
    assert [Path(f).name for f in stats.files] == ["run-1.jsonl", "run-2.jsonl"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="no such file"):
        read_records([str(tmp_path / "nope.jsonl")])


def test_empty_input_is_an_empty_report_with_a_warning(write_lines: Writer) -> None:
    # A session without a single call (an MCP proxy nobody called) leaves an empty file.
    records, stats = read_records([str(write_lines([], "empty.jsonl"))])
    assert records == []
    (warning,) = read_warnings(stats)
    assert "empty.jsonl) is empty" in warning
    assert build_report(records)["overall"]["n"] == 0


def test_input_without_a_trajectory_is_a_clear_message(write_lines: Writer) -> None:
    with pytest.raises(ReportInputError, match="holds no valid line"):
        read_records([str(write_lines(["not json"], "nothing.jsonl"))], skip_invalid=True)
    with pytest.raises(ReportInputError, match="no toolguard trajectory"):
        read_records([str(write_lines([export(call(None, 1))], "foreign.jsonl"))])


def test_progress_only_when_asked(write_lines: Writer, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines([GOOD] * 600)
    read_records([str(path)], progress=None)  # the default: stderr is not a terminal here
    assert capsys.readouterr().err == ""
    read_records([str(path)], progress=True)
    err = capsys.readouterr().err
    assert "\rreading " in err and "lines" in err and err.endswith("\r\033[K")
