"""Property: whatever the chunk boundaries, the streaming reader gives every element and its
line as ``json.loads`` of that element's text would, and refuses every element over a bound
with that bound's error, never a traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard.replay.jsonstream import _Reader

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=20,
)
_BLANK = st.text(st.sampled_from(" \t\r\n"), max_size=4)


class _Pieces:
    """A binary file whose reads end where the test says, whatever size is asked for."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data = data
        self.sizes = sizes or [len(data) or 1]
        self.at = 0
        self.reads = 0

    def read(self, size: int = -1, /) -> bytes:
        step = self.sizes[self.reads % len(self.sizes)]
        self.reads += 1
        piece = self.data[self.at : self.at + step]
        self.at += len(piece)
        return piece


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []


def _errors(
    text: str, value: Any, ascii_only: bool, bounds: tuple[int, int], unit: str
) -> set[str]:
    """The errors an element may be refused with (either, when it is over both bounds)."""
    max_element, max_string = bounds
    why = set()
    if len(text.encode()) > max_element:
        why.add(f"{unit} longer than {max_element:,} bytes")
    if unit == "element" and any(
        len(json.dumps(s, ensure_ascii=ascii_only).encode()) > max_string for s in _strings(value)
    ):
        why.add(f"longer than {max_string:,} bytes (the string limit")
    return why


def _check(got: list[Any], expected: list[tuple[Any, int, set[str]]]) -> None:
    assert len(got) == len(expected)
    for item, (value, line, why) in zip(got, expected, strict=True):
        assert item.where == f"f:{line}"
        if why:
            assert item.value is None and item.error is not None
            assert any(w in item.error for w in why), (item.error, why)
        else:
            assert item.error is None and item.value == value


_BOUNDS = st.tuples(st.integers(8, 400), st.integers(4, 60))


@settings(deadline=None, max_examples=150)
@given(
    st.lists(st.tuples(_VALUES, _BLANK, st.sampled_from([None, 0, 2]), st.booleans()), max_size=8),
    st.lists(st.integers(1, 64), max_size=6),
    _BOUNDS,
)
def test_a_document_in_any_chunks(
    elements: list[tuple[Any, str, int | None, bool]], sizes: list[int], bounds: tuple[int, int]
) -> None:
    doc = "[" if elements else "[ "
    expected = []
    for k, (value, blank, indent, ascii_only) in enumerate(elements):
        text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
        doc += ("," if k else "") + blank
        line = doc.count("\n") + 1
        doc += text
        why = _errors(text, value, ascii_only, bounds, "element")
        expected.append((json.loads(text), line, why))
    doc += "\n]\n"
    reader = _Reader(_Pieces(doc.encode(), sizes), "f", *bounds)  # type: ignore[arg-type]
    _check(list(reader.document(None, None)), expected)


@pytest.mark.slow
@settings(deadline=None, max_examples=150)
@given(
    st.lists(st.tuples(_VALUES, st.integers(0, 2), st.booleans()), min_size=2, max_size=8),
    st.lists(st.integers(1, 64), max_size=6),
    _BOUNDS,
)
def test_json_lines_in_any_chunks(
    rows: list[tuple[Any, int, bool]], sizes: list[int], bounds: tuple[int, int]
) -> None:
    data = ""
    expected = []
    for value, blanks, ascii_only in rows:
        data += "\n" * blanks
        text = json.dumps(value, ensure_ascii=ascii_only)
        expected.append(
            (
                json.loads(text),
                data.count("\n") + 1,
                _errors(text, value, ascii_only, bounds, "line"),
            )
        )
        data += text + "\n"
    reader = _Reader(_Pieces(data.encode(), sizes), "f", *bounds)  # type: ignore[arg-type]
    _check(list(reader.lines(0)), expected)
