"""The replay reader's bounds and costs: a value or line over the limit is refused with the
limit and its line and never held whole, scanning is linear in the input, and memory running
out is never reported as invalid input."""

from __future__ import annotations

import json
import re
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from chatlog import calls, tool, user, write_jsonl

from toolguard.replay import ReplayInputError, ReplayStats, bfcl, bfcl_env, jsonstream, read_runs
from toolguard.replay.cli import main
from toolguard.replay.jsonstream import iter_values

RUN = {"id": "r1", "messages": [user("go"), calls(("c1", "f", {"x": 1})), tool("c1", "ok")]}


class _Counted:
    """A compiled pattern that adds up how far each match or search looked into its text."""

    def __init__(self, pattern: re.Pattern[Any], tally: list[int]) -> None:
        self.pattern = pattern
        self.tally = tally

    def _count(self, found: re.Match[Any] | None, text: Any, pos: int) -> re.Match[Any] | None:
        self.tally[0] += (found.end() if found is not None else len(text)) - pos
        return found

    def match(self, text: Any, pos: int = 0) -> re.Match[Any] | None:
        return self._count(self.pattern.match(text, pos), text, pos)

    def search(self, text: Any, pos: int = 0) -> re.Match[Any] | None:
        return self._count(self.pattern.search(text, pos), text, pos)


def _count_scanning(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every pattern of the replay's modules, counted: what the scanner examines, whichever
    module it lives in."""
    tally = [0]
    for name, module in list(sys.modules.items()):
        if not name.startswith("toolguard.replay."):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, re.Pattern):
                monkeypatch.setattr(module, attr, _Counted(value, tally))
    return tally


SIZE = 64 * 4096  # 64 chunks of 4 KiB: a re-scan per chunk would look 32 times as far


@pytest.mark.parametrize(
    ("text", "ends"),
    [
        ('[{"a": "' + "x" * SIZE, "ends inside a string"),  # the issue's unterminated string
        ('[{"a": "' + "x\\n" * (SIZE // 3) + '"}]', None),
        ('"' + "y" * SIZE + '"', None),
        ("[" + "9" * SIZE + "]", None),  # a long number (a scalar is scanned to its end)
        ('{"' + "k" * SIZE + '": 1}', None),  # a long member name
    ],
)
def test_scanning_is_linear_in_the_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, ends: str | None
) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", 4096)
    path = tmp_path / "long.json"
    path.write_text(text)
    tally = _count_scanning(monkeypatch)
    if ends is None:
        items = list(iter_values(str(path)))
        assert len(items) == 1
    else:
        with pytest.raises(ReplayInputError, match=ends):
            list(iter_values(str(path)))
    assert tally[0] <= 2 * len(text)  # each byte examined about once, not once per chunk


def test_an_element_over_the_bound_is_refused_and_never_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 16)
    path = tmp_path / "runs.json"
    path.write_text('[\n{"a": 1},\n{"big": "' + "z" * (8 << 20) + '", "n": [1, 2]},\n{"c": 3}\n]\n')
    tracemalloc.start()
    try:
        items = list(iter_values(str(path), max_element_bytes=1 << 16, max_string_bytes=1 << 30))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [i.value for i in items] == [{"a": 1}, None, {"c": 3}]
    assert items[1].where == f"{path}:3"
    assert items[1].error == (
        "element longer than 65,536 bytes (the element limit; raise it with --max-element-bytes)"
    )
    assert peak < 2 << 20  # a few chunks, not the 8 MiB element


def test_a_string_over_the_bound_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    path.write_text('[{"a": 1,\n "s": "' + "q" * 200 + '"}, {"b": "short"}]')
    items = list(iter_values(str(path), max_string_bytes=100))
    assert items[0].error == (
        "a string at line 2 longer than 100 bytes (the string limit; raise it with "
        "--max-string-bytes)"
    )
    assert items[0].where == f"{path}:1" and items[1].value == {"b": "short"}
    # A member name is no run: over the bound it stops the file.
    path.write_text('{\n"' + "k" * 200 + '": 1}')
    with pytest.raises(ReplayInputError, match=f"^{re.escape(str(path))}:2: member name: a str"):
        list(iter_values(str(path), max_string_bytes=100))


def test_a_json_lines_line_over_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text('{"a": 1}\n{"b": "' + "w" * 500 + '"}\n\n{"c": 3}\n')
    items = list(iter_values(str(path), max_element_bytes=100))
    assert [(i.value, i.where) for i in items] == [
        ({"a": 1}, f"{path}:1"),
        (None, f"{path}:2"),
        ({"c": 3}, f"{path}:4"),
    ]
    assert items[1].error == (
        "line longer than 100 bytes (the element limit; raise it with --max-element-bytes)"
    )
    # Through the replay: an invalid run, counted and passed over with skip_invalid.
    path.write_text(f"{json.dumps(RUN)}\n{json.dumps({**RUN, 'pad': 'p' * 500})}\n")
    stats = ReplayStats()
    runs = list(read_runs("openai", [path], skip_invalid=True, stats=stats, max_element_bytes=400))
    assert len(runs) == 1 and stats.skipped == 1
    assert (stats.first_skipped or "").startswith(f"{path}:2 (run 2): line longer than 400 bytes")


def test_the_command_line_names_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_jsonl(tmp_path / "runs.jsonl", [RUN, {**RUN, "id": "r2", "pad": "p" * 400}])
    out = tmp_path / "spans.jsonl"
    assert main(["openai", str(log), "--out", str(out), "--max-element-bytes", "400"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"toolguard: error: {log}:2 (run 2): line longer than 400 bytes (the element limit; "
        "raise it with --max-element-bytes)\n"
    )
    assert main(["openai", str(log), "--out", str(out), "--quiet"]) == 0
    assert main(["openai", str(log), "--out", str(out), "--max-string-bytes", "0"]) == 2
    assert "must be >= 1" in capsys.readouterr().err


def _out_of_memory(_text: Any) -> Any:
    raise MemoryError


def _orjson_out_of_memory(_text: Any) -> Any:
    # What orjson raises when it cannot allocate its parse buffer: a decode error.
    raise orjson.JSONDecodeError("Not enough memory to allocate buffer for parsing", "", 0)


@pytest.mark.parametrize("loads", [_out_of_memory, _orjson_out_of_memory])
@pytest.mark.parametrize("name", ["runs.json", "runs.jsonl"])
def test_memory_running_out_is_not_invalid_input(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    loads: Any,
    name: str,
) -> None:
    path = tmp_path / name
    path.write_text(json.dumps([RUN]) if name.endswith(".json") else json.dumps(RUN) + "\n")
    monkeypatch.setattr(jsonstream, "_loads", loads)
    with pytest.raises(MemoryError) as err:
        list(iter_values(str(path)))
    assert not isinstance(err.value, ReplayInputError)
    assert str(err.value).startswith(f"{path}:1: out of memory")
    assert "not valid JSON" not in str(err.value)
    # Not an invalid run either: --skip-invalid does not pass over it, and no traceback.
    out = tmp_path / "spans.jsonl"
    assert main(["openai", str(path), "--out", str(out), "--skip-invalid", "--quiet"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"toolguard: error: {path}:1: out of memory")


def test_text_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    path.write_bytes(b'[{"a": 1},\n{"b": "\xff"}]')
    with pytest.raises(ReplayInputError, match=f"^{re.escape(str(path))}:2: not UTF-8 text"):
        list(iter_values(str(path)))


# -- BFCL result files: JSON Lines named .json, read by the same reader ----------------------

BFCL_ENTRY = {"id": "multi_turn_base_0", "result": [["[cd(folder='document'), ls()]"]]}


def _bfcl_file(path: Path, *entries: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def test_a_bfcl_line_over_the_bound_is_refused_and_never_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 16)
    path = tmp_path / "m" / "BFCL_v4_multi_turn_base_result.json"
    big = {"id": "multi_turn_base_1", "result": [["x" * (8 << 20)]]}
    _bfcl_file(path, BFCL_ENTRY, big, {**BFCL_ENTRY, "id": "multi_turn_base_2"})
    why = "line longer than 65,536 bytes (the element limit; raise it with --max-element-bytes)"
    with pytest.raises(ReplayInputError, match=f"^{re.escape(f'{path}:2: {why}')}$"):
        list(bfcl.iter_entries(path, max_element_bytes=1 << 16))
    skipped: list[str] = []
    tracemalloc.start()
    try:
        entries = list(
            bfcl.iter_entries(path, skip_invalid=True, skipped=skipped, max_element_bytes=1 << 16)
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [e.id for e in entries] == ["multi_turn_base_0", "multi_turn_base_2"]
    assert skipped == [f"{path}:2: {why}"]
    assert peak < 2 << 20  # a few chunks, not the 8 MiB line


def test_the_element_bound_applies_to_bfcl_runs_and_their_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bfcl_env, "available", lambda: False)
    path = tmp_path / "m" / "BFCL_v4_multi_turn_base_result.json"
    _bfcl_file(path, BFCL_ENTRY, {**BFCL_ENTRY, "id": "multi_turn_base_1", "pad": "p" * 400})
    why = "line longer than 400 bytes (the element limit; raise it with --max-element-bytes)"
    stats = ReplayStats()
    runs = list(read_runs("bfcl", [path], skip_invalid=True, stats=stats, max_element_bytes=400))
    assert [r.id for r in runs] == ["m/multi_turn_base_0"]
    assert stats.skipped == 1 and stats.first_skipped == f"{path}:2: {why}"
    out = tmp_path / "spans.jsonl"
    assert main(["bfcl", str(path), "--out", str(out), "--max-element-bytes", "400"]) == 2
    assert capsys.readouterr().err == f"toolguard: error: {path}:2: {why}\n"
    assert main(["bfcl", str(path), "--out", str(out), "--quiet"]) == 0


class _CountedBytes(bytes):
    """A chunk that adds up how far each search for a newline, or count of them, looked: the
    JSON Lines reader's work is in these, not in patterns."""

    tally: list[int]

    def find(self, sub: Any, start: Any = None, end: Any = None) -> int:
        found = super().find(sub, start, end)
        stop = len(self) if end is None else end
        self.tally[0] += (stop if found < 0 else found + 1) - (start or 0)
        return found

    def count(self, sub: Any, start: Any = None, end: Any = None) -> int:
        self.tally[0] += (len(self) if end is None else end) - (start or 0)
        return super().count(sub, start, end)


class _CountingSource:
    def __init__(self, path: str, tally: list[int]) -> None:
        self.fh = open(path, "rb")  # noqa: SIM115 - closed by the reader
        self.tally = tally

    def read(self, size: int = -1, /) -> bytes:
        chunk = _CountedBytes(self.fh.read(size))
        chunk.tally = self.tally
        return chunk

    def close(self) -> None:
        self.fh.close()


def test_a_long_bfcl_line_is_scanned_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", 4096)
    tally = [0]
    monkeypatch.setattr(jsonstream, "open_binary", lambda path: _CountingSource(path, tally))
    path = tmp_path / "m" / "BFCL_v4_multi_turn_base_result.json"
    # One line of 64 chunks: a search from the line's start at every chunk looks 32 times as far.
    long_step = "[" + ", ".join(["ls()"] * (SIZE // 6)) + "]"
    _bfcl_file(path, BFCL_ENTRY, {"id": "multi_turn_base_1", "result": [[long_step]]})
    size = path.stat().st_size
    entries = list(bfcl.iter_entries(path))
    assert [len(e.steps[0][1]) for e in entries] == [2, SIZE // 6]
    assert size <= tally[0] <= 3 * size  # every byte searched, each about once


@pytest.mark.parametrize("loads", [_out_of_memory, _orjson_out_of_memory])
def test_memory_running_out_in_a_bfcl_file_is_not_invalid_input(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    loads: Any,
) -> None:
    path = _bfcl_file(tmp_path / "m" / "BFCL_v4_multi_turn_base_result.json", BFCL_ENTRY)
    monkeypatch.setattr(jsonstream, "_loads", loads)
    with pytest.raises(MemoryError) as err:
        list(bfcl.iter_entries(path, skip_invalid=True, skipped=[]))
    assert not isinstance(err.value, ReplayInputError)
    assert str(err.value).startswith(f"{path}:1: out of memory")
    out = tmp_path / "spans.jsonl"
    assert main(["bfcl", str(path), "--out", str(out), "--skip-invalid", "--quiet"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"toolguard: error: {path}:1: out of memory")
