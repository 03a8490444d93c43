"""The garbage collector and the report (issue 11, "The report on hostile files").

``read_records`` is a library call: it must not switch the collector off for the process (and
so for every other thread). The ``toolguard`` command, which owns its process, may, but always
restores the collector's state, on success, on an input error and on Ctrl-C."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_report_spans import export, trajectory, write

from toolguard._cli import main
from toolguard.report import collect
from toolguard.report.collect import Collector
from toolguard.report.read import read_records
from toolguard.report.reader import ReadStats, ReportInputError, iter_exports

GOOD = export(*trajectory("a", 2))


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """gc.isenabled() as observed by every Collector.feed call."""
    states: list[bool] = []
    real = Collector.feed

    def feed(
        self: Collector, request: collect.ExportRequest, *, skip_spans: bool = False
    ) -> list[collect.BadSpan]:
        states.append(gc.isenabled())
        return real(self, request, skip_spans=skip_spans)

    monkeypatch.setattr(Collector, "feed", feed)
    was = gc.isenabled()
    yield states
    (gc.enable if was else gc.disable)()


def test_read_records_leaves_the_collector_on(tmp_path: Path, seen: list[bool]) -> None:
    path = write(tmp_path / "s.jsonl", [GOOD] * 3)
    assert gc.isenabled()
    read_records([str(path)])
    assert seen == [True, True, True] and gc.isenabled()


def test_read_records_leaves_the_collector_off_if_it_was(tmp_path: Path, seen: list[bool]) -> None:
    path = write(tmp_path / "s.jsonl", [GOOD])
    gc.disable()
    read_records([str(path)])
    assert seen == [False] and not gc.isenabled()


def test_another_thread_never_sees_it_off(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [GOOD] * 2000)
    stop = threading.Event()
    off: list[bool] = []

    def watch() -> None:
        while not stop.is_set():
            if not gc.isenabled():
                off.append(True)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        read_records([str(path)])
    finally:
        stop.set()
        watcher.join()
    assert off == []


def test_a_generator_closed_early_changes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [GOOD] * 5)
    it = iter_exports([str(path)], ReadStats())
    next(it)
    it.close()
    assert gc.isenabled()


def test_the_command_turns_it_off_for_the_read_and_back_on(
    tmp_path: Path, seen: list[bool], capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path / "good.jsonl", [GOOD] * 2)
    bad = write(tmp_path / "bad.jsonl", [GOOD, "{oops"])
    assert main(["report", str(good), "--quiet"]) == 0
    assert seen == [False, False] and gc.isenabled()
    assert main(["report", str(bad), "--quiet"]) == 2  # an input error mid-read
    assert gc.isenabled()
    assert main(["compare", str(bad), "--by", "m", "--a", "x", "--b", "y", "--quiet"]) == 2
    assert gc.isenabled()
    gc.disable()  # whoever called main() had it off: it stays off
    assert main(["report", str(good), "--quiet"]) == 0
    assert not gc.isenabled()
    capsys.readouterr()


def test_the_command_restores_it_on_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(
        self: Collector, request: collect.ExportRequest, *, skip_spans: bool = False
    ) -> list[collect.BadSpan]:
        raise KeyboardInterrupt

    monkeypatch.setattr(Collector, "feed", interrupted)
    assert main(["report", str(write(tmp_path / "s.jsonl", [GOOD])), "--quiet"]) == 130
    assert gc.isenabled()
    assert "interrupted" in capsys.readouterr().err


def test_library_errors_leave_it_on(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError):
        read_records([str(write(tmp_path / "s.jsonl", [GOOD, "{oops"]))])
    assert gc.isenabled()
