"""Over-long lines and gzip bombs (issue 11, "The report on hostile files").

A line longer than the line-length limit is refused (or skipped) while it is being read: it is
never held whole, so a small .gz file that expands to one line of hundreds of MB costs no more
memory than the limit. The bombs here are a few hundred MB uncompressed at most and the limit
is set low, so the tests stay fast."""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from test_report_spans import export, trajectory, write

from toolguard._cli import main
from toolguard.report.build import read_warnings
from toolguard.report.read import read_records
from toolguard.report.reader import DEFAULT_MAX_LINE_BYTES, ReportInputError

MiB = 1 << 20
T = TypeVar("T")


def bomb(path: Path, line_mib: int, *, then: bytes = b"") -> Path:
    """A .gz file whose first line is ``line_mib`` MiB of 'x' without a newline, then ``then``.

    Built from one compressed MiB repeated as gzip members (a gzip file may be several members
    back to back): a 256 MiB line is a file of about 256 KB, written in milliseconds."""
    member = gzip.compress(b"x" * MiB, compresslevel=9)
    with path.open("wb") as f:
        for _ in range(line_mib):
            f.write(member)
        f.write(gzip.compress(b"\n" + then))
    return path


def peak_of(fn: Callable[[], T]) -> tuple[T | BaseException, int]:
    """Run ``fn`` under tracemalloc: its result (or the exception it raised) and the peak of
    Python allocations meanwhile."""
    tracemalloc.start()
    try:
        try:
            result: Any = fn()
        except (ReportInputError, SystemExit) as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_gzip_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    path = bomb(tmp_path / "bomb.jsonl.gz", 256)
    assert path.stat().st_size < 2 * MiB  # 256 MiB of line inside
    result, peak = peak_of(lambda: read_records([str(path)], max_line_bytes=MiB))
    assert isinstance(result, ReportInputError)
    assert str(result) == (
        f"{path}:1: line longer than 1,048,576 bytes (the line-length limit; raise it with "
        "--max-line-bytes)"
    )
    assert peak < 8 * MiB  # the limit and some buffers, never the line


def test_the_bomb_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = bomb(tmp_path / "bomb.jsonl.gz", 64)
    argv = ["report", str(path), "--max-line-bytes", str(MiB), "--quiet"]
    code, peak = peak_of(lambda: main(argv))
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (
        f"toolguard: error: {path}:1: line longer than 1,048,576 bytes (the line-length limit; "
        "raise it with --max-line-bytes)\n"
    )
    assert peak < 8 * MiB


def test_skip_invalid_drops_the_long_line_without_holding_it(tmp_path: Path) -> None:
    line = write(tmp_path / "good.jsonl", [export(*trajectory("a", 2))]).read_bytes()
    path = bomb(tmp_path / "bomb.jsonl.gz", 16, then=line)
    (records, stats), peak = peak_of(
        lambda: read_records([str(path)], max_line_bytes=MiB, skip_invalid=True)
    )
    assert [r.trajectory_id for r in records] == ["a"]
    assert stats.skipped == 1 and stats.lines == 2
    assert read_warnings(stats) == [
        f"1 invalid input lines skipped; the first: {path}:1: line longer than 1,048,576 bytes "
        "(the line-length limit; raise it with --max-line-bytes)"
    ]
    assert peak < 8 * MiB


@pytest.mark.parametrize("compress", [False, True])
def test_the_limit_is_exact(tmp_path: Path, compress: bool) -> None:
    """A line of exactly the limit (newline not counted) is read; one byte more is not."""
    text = write(tmp_path / "one.jsonl", [export(*trajectory("a", 1))]).read_bytes()
    size = len(text) - 1  # without its newline
    path = tmp_path / ("s.jsonl.gz" if compress else "s.jsonl")
    for data in (text, text[:-1]):  # with and without a final newline
        path.write_bytes(gzip.compress(data) if compress else data)
        assert len(read_records([str(path)], max_line_bytes=size)[0]) == 1
        with pytest.raises(ReportInputError, match=f"^{path}:1: line longer than {size - 1} "):
            read_records([str(path)], max_line_bytes=size - 1)


def test_a_long_line_in_the_middle_names_its_line(tmp_path: Path) -> None:
    good = export(*trajectory("a", 1))
    path = write(tmp_path / "s.jsonl", [good, "", "[" + "0," * 5000 + "0]", good])
    with pytest.raises(ReportInputError, match=f"^{path}:3: line longer than 1,000 bytes"):
        read_records([str(path)], max_line_bytes=1000)
    records, stats = read_records([str(path)], max_line_bytes=1000, skip_invalid=True)
    assert len(records) == 1 and stats.skipped == 1 and stats.lines == 4


def test_deep_nesting_is_an_ordinary_bad_line(tmp_path: Path) -> None:
    path = write(tmp_path / "deep.jsonl", ["[" * 100_000 + "]" * 100_000])
    with pytest.raises(ReportInputError, match=f"^{path}:1: not valid JSON"):
        read_records([str(path)])


def test_the_default_is_documented() -> None:
    assert 64 * MiB == DEFAULT_MAX_LINE_BYTES
    doc = (Path(__file__).parents[2] / "docs" / "report-limits.md").read_text(encoding="utf-8")
    assert "67,108,864 (64 MiB)" in doc and "--max-line-bytes" in doc and "max_line_bytes" in doc
    with pytest.raises(ValueError, match="max_line_bytes"):
        read_records(["-"], max_line_bytes=0)
