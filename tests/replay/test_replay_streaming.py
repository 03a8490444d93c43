"""The streaming reader: any chunk boundary, line numbers, one element in memory at a time."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from toolguard.replay import ReplayInputError, jsonstream
from toolguard.replay.jsonstream import iter_values

TRICKY = [
    {"s": 'brackets ] } [ { and "quotes" and \\ backslash', "n": [1, 2.5, -3e2, True, None]},
    {"u": "naïve — ünïcødé ✓", "nested": {"a": [[], {}, [{"b": "]"}]]}},
    "a string element",
    42,
    [],
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_elements_survive_every_chunk_boundary(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(TRICKY, indent=2, ensure_ascii=False))
    items = list(iter_values(str(path)))
    assert [i.value for i in items] == TRICKY
    assert [i.element for i in items] == [0, 1, 2, 3, 4]
    lines = path.read_text().splitlines()
    for item in items:  # each element's line is where its text starts
        line = int(item.where.rsplit(":", 1)[1])
        assert lines[line - 1].strip()[:1] in '{"4['


def test_a_streamed_member_keeps_the_members_before_it(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    doc = {"info": {"x": 1}, "tasks": [{"big": "y" * 1000}], "simulations": [{"a": 1}, {"b": 2}]}
    path.write_text(json.dumps(doc, indent=4))
    items = list(iter_values(str(path), stream_key="simulations", keep=frozenset({"info"})))
    assert [(i.value, dict(i.header)) for i in items] == [
        ({"a": 1}, {"info": {"x": 1}}),
        ({"b": 2}, {"info": {"x": 1}}),
    ]


def test_memory_holds_about_one_element(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", 4096)
    element = {"messages": ["x" * 100] * 20}  # about 2 KB
    path = tmp_path / "big.json"
    path.write_text(json.dumps([element] * 2000))  # about 4 MB
    largest = count = 0
    with open(path, "rb") as fh:
        reader = jsonstream._Reader(fh, str(path))
        for item in reader.array(0, {}):
            assert item.value == element
            largest = max(largest, len(reader.buf))
            count += 1
    assert count == 2000 and largest < 3 * 4096 + 2 * len(json.dumps(element))


def test_json_lines_under_a_json_name_and_gzip(tmp_path: Path) -> None:
    rows = [{"a": i} for i in range(3)]
    path = tmp_path / "log.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [i.value for i in iter_values(str(path))] == rows
    gz = tmp_path / "log.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows) + "\n{broken\n")
    got = list(iter_values(str(gz)))
    assert [i.value for i in got[:3]] == rows
    assert got[3].error is not None and got[3].where == f"{gz}:5"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('[{"a": 1}, {"b": 2}', "found the end of the input"),
        ('[{"a": 1} {"b": 2}]', "expected ',' or ']'"),
        ('[{"a": "unterminated}]', "ends inside"),
        ('{"a": 1}\n{"b": 2} {"c": 3}\n', ""),  # JSON Lines: the second line is bad, reported
        ('[\n{"a": 1}\n]\n{"b": 2}\n', "more JSON after the end of the document"),
    ],
)
def test_broken_documents_name_the_line(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    if not why:
        items = list(iter_values(str(path)))
        assert items[1].error is not None and items[1].where.endswith(":2")
        return
    with pytest.raises(ReplayInputError, match=why) as err:
        list(iter_values(str(path)))
    assert str(err.value).startswith(f"{path}:")


def test_an_element_that_does_not_decode_is_reported_alone(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('[\n  {"a": 1},\n  {"b": tru},\n  {"c": 3}\n]\n')
    items: list[Any] = list(iter_values(str(path)))
    assert [i.value for i in items] == [{"a": 1}, None, {"c": 3}]
    assert items[1].where == f"{path}:3" and "not valid JSON" in (items[1].error or "")
