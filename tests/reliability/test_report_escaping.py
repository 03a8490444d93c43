"""Labels and ids from hostile files, printed (issue 11, "The report on hostile files").

No terminal escape sequence or other control character reaches the terminal (text table,
warnings, compare, error messages, progress line); no CSV cell starts a formula; no Markdown
cell ends early or turns into markup; no label breaks ``--plot`` (matplotlib mathtext). The
JSON report keeps every value exact."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_report_spans import call, export, kv, raw, span, trajectory, write

from toolguard import _contract as A
from toolguard._cli import main
from toolguard.report.build import build_report
from toolguard.report.compare import compare, render_compare
from toolguard.report.escape import csv_cell, markdown_cell, mathtext_literal, printable
from toolguard.report.metrics import TrajectoryRecord
from toolguard.report.read import read_records
from toolguard.report.render import render_csv, render_markdown, render_text

# Everything a terminal could act on: C0 (but the newline between lines), DEL, C1, the Unicode
# line separators and the bidirectional controls.
CONTROL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
FORMULA = ("=", "+", "-", "@", "\t", "\r")

HOSTILE = [
    "\x1b[2J\x1b[31mred",  # clear the screen, then red
    "\x1b]0;pwned\x07",  # OSC: set the terminal title
    "\x9b31m",  # C1 CSI, one byte
    "bell\x07",
    "two\nlines",
    "carriage\rreturn",
    "\u202eevil",  # right-to-left override
    '=HYPERLINK("http://x","y")',
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\tTAB",
    "\rCR",
    "pipe|cell",
    "**bold** _it_ `code` [link](http://x) <script>alert(1)</script> &amp;",
    "$\\undefinedmacro{$",
    "$x^$",
    "a$b",
    "\\",
    "_hidden",
    "",
]


def hostile_file(tmp_path: Path) -> Path:
    lines = []
    for i, label in enumerate(HOSTILE):
        lines.append(export(*trajectory(f"id{i}{label}", 2, 2, labels={"model": label})))
        lines.append(export(call(f"inc{i}{label}", 1)))  # incomplete: its id is in a warning
    return write(tmp_path / "hostile.jsonl", lines)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_text_table_and_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["report", str(hostile_file(tmp_path)), "--by", "model"], capsys)
    assert code == 0 and err == ""
    assert CONTROL.search(out) is None
    # One row per group, each on its own line: no label broke a row in two.
    first_table = out.split("\n\n")[0].splitlines()
    assert len(first_table) == 1 + 2 + len(HOSTILE) + 2  # title, head, rule, groups, null, all
    assert "model=\\x1b[2J\\x1b[31mred" in out and "model=two\\nlines" in out
    warnings = out.split("Warnings\n", 1)[1]
    assert "inc0\\x1b[2J" in warnings


def test_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["report", str(hostile_file(tmp_path)), "--by", "model", "--format", "markdown"], capsys
    )
    assert code == 0 and CONTROL.search(out) is None
    tables = [b for b in out.split("\n\n") if b.startswith("| ")]
    assert len(tables) == 4
    for table in tables:  # every row has as many cells as its head: no unescaped '|'
        rows = table.splitlines()
        assert len(rows) == 2 + len(HOSTILE) + 2  # head, rule, groups, null, all
        assert len({len(re.split(r"(?<!\\)\|", row)) for row in rows}) == 1, table
    assert "<script>" not in out and "\\<script\\>" in out
    assert "pipe\\|cell" in out and "\\*\\*bold\\*\\*" in out


def test_csv_has_no_formula(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["report", str(hostile_file(tmp_path)), "--by", "model", "--format", "csv"], capsys
    )
    assert code == 0 and CONTROL.search(out) is None
    rows = list(csv.reader(io.StringIO(out)))
    assert len(rows) == 1 + len(HOSTILE) + 2
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA), cell
    labels = [r[0] for r in rows[1:]]
    assert '\'=HYPERLINK("http://x","y")' in labels and "'-2+3" in labels
    assert "'@SUM(A1)" in labels and "'\\tTAB" in labels and "'\\rCR" in labels


def test_json_keeps_the_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["report", str(hostile_file(tmp_path)), "--by", "model", "--format", "json"], capsys
    )
    assert code == 0 and "\x1b" not in out  # JSON escapes it: \u001b
    groups = json.loads(out)["groups"]
    assert {g["labels"]["model"] for g in groups} == {*HOSTILE, None}


def test_plot_shows_labels_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    nasty = ["$\\undefinedmacro{$", "$x^$", "a$b$c", "\\", "_hidden", "\x1b[31m", "two\nlines"]
    path = write(
        tmp_path / "plot.jsonl",
        [export(*trajectory(f"t{i}", 2, 2, labels={"model": m})) for i, m in enumerate(nasty)],
    )
    png = tmp_path / "pec.png"
    code, _, err = run(["report", str(path), "--by", "model", "--plot", str(png)], capsys)
    assert code == 0, err
    assert png.read_bytes().startswith(b"\x89PNG")
    # The raw label does not even draw; what the plot hands matplotlib is plain text.
    fig = Figure()
    fig.text(0, 0, nasty[0])
    with pytest.raises(ValueError):
        fig.savefig(io.BytesIO(), format="png")
    for label in nasty:
        fig = Figure()
        text = fig.text(0, 0, mathtext_literal(label))
        fig.savefig(io.BytesIO(), format="png")
        assert not text._preprocess_math(text.get_text())[1]  # not parsed as mathtext


def test_compare_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        export(*trajectory(f"a{i}", 1, labels={"m": "a", "task": t})) for i, t in enumerate(HOSTILE)
    ] + [export(*trajectory("b0", 1, labels={"m": "b\x1b[31m", "task": HOSTILE[0]}))]
    path = write(tmp_path / "c.jsonl", lines)
    code, out, err = run(
        ["compare", str(path), "--by", "m", "--a", "a", "--b", "b\x1b[31m"], capsys
    )
    assert code == 0, err
    assert CONTROL.search(out) is None and "b\\x1b[31m" in out
    # An error naming the label values seen: escaped too, and bounded.
    code, out, err = run(["compare", str(path), "--by", "m", "--a", "a", "--b", "zz"], capsys)
    assert code == 2 and CONTROL.search(err.rstrip("\n")) is None and "b\\x1b[31m" in err


def test_error_messages_and_file_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = span([kv(A.TRAJECTORY_ID, "t\x1b[2J"), raw(A.STEP, {"stringValue": "\x1b[31m" * 1000})])
    path = write(tmp_path / "evil\x1b[2Jname.jsonl", [export(bad)])
    code, out, err = run(["report", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and CONTROL.search(err[:-1]) is None
    assert "evil\\x1b[2Jname.jsonl:1: toolguard.step is not an integer" in err
    assert len(err) < 500
    # The progress line names the file too.
    good = write(tmp_path / "p\x1b[2J.jsonl", [export(*trajectory("a", 1))] * 300)
    read_records([str(good)], progress=True)
    progress = capsys.readouterr().err
    assert (
        "p\\x1b[2J.jsonl" in progress
        and CONTROL.search(progress.replace("\r", "").replace("\x1b[K", "")) is None
    )


# -- fuzzing the renderers ----------------------------------------------------------------------

_label = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"])
    | st.sampled_from(
        ["\x1b", "\x9b", "\n", "\r", "\t", "|", "$", "=", "-", "+", "@", "<", "\\", "\u202e"]
    ),
    max_size=12,
)


@pytest.mark.slow
@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(labels=st.lists(_label, min_size=1, max_size=5, unique=True))
def test_fuzzed_labels_never_escape_their_cell(labels: list[str]) -> None:
    records = [
        TrajectoryRecord(f"t{i}{label}", 2, 2, "schema", True, {"model": label}, incomplete=True)
        for i, label in enumerate(labels)
    ]
    report = build_report(records, by=["model"], resamples=5)
    text = render_text(report)
    assert CONTROL.search(text) is None
    assert len(text.split("\n\n")[0].splitlines()) == 3 + len(labels) + (len(labels) > 1)
    md = render_markdown(report)
    assert CONTROL.search(md) is None
    head = md.splitlines()[2]
    for row in md.split("\n\n")[1].splitlines()[2:]:
        assert len(re.split(r"(?<!\\)\|", row)) == len(re.split(r"(?<!\\)\|", head))
    out = render_csv(report)
    assert CONTROL.search(out) is None
    rows = list(csv.reader(io.StringIO(out)))
    assert len(rows) == 1 + len(labels) + (len(labels) > 1)
    assert not any(cell.startswith(FORMULA) for row in rows for cell in row)
    for label in labels:
        for escaped in (printable(label), csv_cell(label), markdown_cell(label)):
            assert CONTROL.search(escaped) is None
        assert "$" not in mathtext_literal(label).replace("\\$", "")


def test_compare_render_escapes_warnings() -> None:
    a = [TrajectoryRecord("x", 1, 2, labels={"m": "a", "task": "t"})]
    b = [TrajectoryRecord("y", 1, 2, labels={"m": "\x1b[31m"})]
    result = compare(
        a + b + [TrajectoryRecord("z", 1, 2, labels={"m": "\x1b[31m", "task": "t"})],
        {"m": "a"},
        {"m": "\x1b[31m"},
    )
    text = render_compare(result)
    assert CONTROL.search(text) is None and "\\x1b[31m" in text
