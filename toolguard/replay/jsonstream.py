"""Recorded runs out of JSON files, one run in memory at a time.

A tau2 results file or a tau-bench list of runs is one JSON document of many megabytes; a
log is JSON Lines. Both are read without loading the whole file: a document's top-level array
(or one named member of its top-level object, tau2's ``simulations``) is cut into elements
by a scanner that only tracks brackets and strings, and each element is decoded on its own.
So a malformed element is reported with its line and can be skipped, and memory holds the
element being read, not the file.

Files named ``*.jsonl`` / ``*.ndjson`` (optionally ``.gz``) are read line by line. Any other
file is a JSON document, except that a first value alone on its first line followed by more
lines is taken as JSON Lines too (a log saved as ``.json``). ``-`` is standard input.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from .model import ReplayInputError

try:
    import orjson

    _loads: Callable[[str], Any] = orjson.loads
    _DecodeError: tuple[type[Exception], ...] = (orjson.JSONDecodeError, ValueError)
except ImportError:  # pragma: no cover - orjson is a dependency of the package
    _loads = json.loads
    _DecodeError = (ValueError,)

CHUNK = 1 << 20
STDIN = "-"
_LINE_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")
_WS = re.compile(r"\s*")
_PLAIN = re.compile(r'[^"\[\]{}]*')  # anything that is neither a bracket nor a string
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR_END = re.compile(r"[\s,\]}]")


@dataclass(slots=True)
class Located:
    """One value read from a file: a whole top-level value, or one element of the streamed
    array (``element`` is its index). ``header``: the members of the enclosing top-level
    object read before the streamed array (tau2's ``info``). ``error``: why the value could
    not be decoded (``value`` is then None)."""

    value: Any
    where: str
    top: int
    element: int | None = None
    header: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


def open_text(path: str) -> TextIO:
    if path == STDIN:
        return sys.stdin
    try:
        if path.endswith(".gz"):
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
        return open(path, encoding="utf-8")
    except OSError as exc:
        raise ReplayInputError(f"{path}: cannot open: {exc.strerror or exc}") from None


def iter_values(
    path: str, *, stream_key: str | None = None, keep: frozenset[str] | None = None
) -> Iterator[Located]:
    """The values of one file (see the module's docstring). ``stream_key``: the member of a
    top-level object whose array is streamed; ``keep``: the other members worth decoding
    (None: all of them), handed on as ``header``."""
    name = "<stdin>" if path == STDIN else path
    fh = open_text(path)
    try:
        reader = _Reader(fh, name)
        try:
            if path.endswith(_LINE_SUFFIXES):
                yield from reader.lines(0)
            else:
                yield from reader.document(stream_key, keep)
        except UnicodeDecodeError as exc:
            raise ReplayInputError(f"{name}: not UTF-8 text: {exc}") from None
        except (OSError, EOFError) as exc:
            raise ReplayInputError(f"{name}: cannot read: {exc}") from None
    finally:
        if fh is not sys.stdin:
            fh.close()


class _Reader:
    """A growing text buffer over a file, with the line number of any position in it."""

    def __init__(self, fh: TextIO, name: str) -> None:
        self.fh = fh
        self.name = name
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._counted = 0  # newlines are counted up to this index of buf
        self._line = 1  # the line number at buf[_counted]

    # -- buffer --------------------------------------------------------------------------
    def fill(self) -> bool:
        """Append a chunk; indices into the buffer stay valid."""
        if self.eof:
            return False
        chunk = self.fh.read(CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def compact(self) -> None:
        """Drop what was consumed (only where no index into the buffer is held), so the
        buffer holds about one value."""
        if self.pos > CHUNK:
            self.line_at(self.pos)
            self.buf = self.buf[self.pos :]
            self._counted -= self.pos
            self.pos = 0

    def line_at(self, index: int) -> int:
        if index > self._counted:
            self._line += self.buf.count("\n", self._counted, index)
            self._counted = index
        return self._line

    def where(self, index: int) -> str:
        return f"{self.name}:{self.line_at(index)}"

    def fail(self, index: int, what: str) -> ReplayInputError:
        return ReplayInputError(f"{self.where(index)}: {what}")

    def peek(self) -> str | None:
        """The next non-blank character (not consumed), or None at the end of the input."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            self.compact()
            if not self.fill():
                return None

    def expect(self, char: str, what: str) -> None:
        got = self.peek()
        if got != char:
            found = "the end of the input" if got is None else repr(got)
            raise self.fail(self.pos, f"expected {what}, found {found}")
        self.pos += 1

    # -- scanning ------------------------------------------------------------------------
    def raw(self) -> tuple[str, int]:
        """The text of the next JSON value (consumed) and its start index, without decoding:
        brackets and strings are tracked, the rest is left to the decoder."""
        self.compact()
        start = self.pos
        i = start
        first = self.buf[i]
        if first in "[{":
            depth = 0
            while True:
                i = _PLAIN.match(self.buf, i).end()  # type: ignore[union-attr]
                if i >= len(self.buf):
                    if not self.fill():
                        raise self.fail(start, "the input ends inside this value")
                    continue
                char = self.buf[i]
                if char == '"':
                    match = _STRING.match(self.buf, i)
                    if match is None:
                        if not self.fill():
                            raise self.fail(start, "the input ends inside a string")
                        continue
                    i = match.end()
                    continue
                depth += 1 if char in "[{" else -1
                i += 1
                if depth == 0:
                    break
        elif first == '"':
            while (match := _STRING.match(self.buf, i)) is None:
                if not self.fill():
                    raise self.fail(start, "the input ends inside a string")
            i = match.end()
        else:
            while (found := _SCALAR_END.search(self.buf, i)) is None:
                if not self.fill():
                    break
            i = found.start() if found is not None else len(self.buf)
            if i == start:
                raise self.fail(start, f"expected a JSON value, found {first!r}")
        self.pos = i
        return self.buf[start:i], start

    def decoded(self, top: int, element: int | None, header: Mapping[str, Any]) -> Located:
        text, start = self.raw()
        where = self.where(start)
        try:
            return Located(_loads(text), where, top, element, header)
        except _DecodeError as exc:
            return Located(None, where, top, element, header, f"not valid JSON ({exc})")

    # -- the two shapes ------------------------------------------------------------------
    def document(self, stream_key: str | None, keep: frozenset[str] | None) -> Iterator[Located]:
        first = self.peek()
        if first is None:
            return
        start_line = self.line_at(self.pos)
        if first == "[":
            yield from self.array(0, {})
        elif first == "{":
            yield from self.members(stream_key, keep)
        else:
            yield self.decoded(0, None, {})
        end_line = self.line_at(self.pos)
        if self.peek() is None:
            return
        if start_line != end_line or self.line_at(self.pos) == end_line:
            raise self.fail(
                self.pos,
                "more JSON after the end of the document (a document is one JSON value; "
                "JSON Lines hold one value per line)",
            )
        # One value alone on the first line, then more lines: JSON Lines under another name.
        yield from self.lines(1)

    def array(self, top: int, header: Mapping[str, Any]) -> Iterator[Located]:
        self.expect("[", "'['")
        if self.peek() == "]":
            self.pos += 1
            return
        index = 0
        while True:
            if self.peek() is None:
                raise self.fail(self.pos, "the input ends inside an array")
            yield self.decoded(top, index, header)
            index += 1
            after = self.peek()
            if after == ",":
                self.pos += 1
            elif after == "]":
                self.pos += 1
                return
            else:
                found = "the end of the input" if after is None else repr(after)
                raise self.fail(self.pos, f"expected ',' or ']' after an element, found {found}")

    def members(self, stream_key: str | None, keep: frozenset[str] | None) -> Iterator[Located]:
        start = self.pos
        where = self.where(start)
        self.expect("{", "'{'")
        kept: dict[str, Any] = {}
        streamed = False
        if self.peek() == "}":
            self.pos += 1
        else:
            while True:
                if self.peek() != '"':
                    raise self.fail(self.pos, "expected a member name (a string)")
                key_text, _ = self.raw()
                key = json.loads(key_text)
                self.expect(":", "':' after a member name")
                if self.peek() is None:
                    raise self.fail(self.pos, "the input ends inside an object")
                if key == stream_key and self.peek() == "[":
                    streamed = True
                    yield from self.array(0, dict(kept))
                elif keep is None or key in keep:
                    value = self.decoded(0, None, {})
                    if value.error is not None:
                        raise ReplayInputError(f"{value.where}: member {key!r}: {value.error}")
                    kept[key] = value.value
                else:
                    self.raw()  # a member nobody reads (tau2's task list): scanned, dropped
                after = self.peek()
                if after == ",":
                    self.pos += 1
                elif after == "}":
                    self.pos += 1
                    break
                else:
                    found = "the end of the input" if after is None else repr(after)
                    raise self.fail(self.pos, f"expected ',' or '}}' in an object, found {found}")
        if not streamed:
            yield Located(kept, where, 0)

    def lines(self, top: int) -> Iterator[Located]:
        """One value per line from here on; a line that does not decode is reported alone."""
        while True:
            self.compact()
            nl = self.buf.find("\n", self.pos)
            while nl < 0:
                searched = len(self.buf)  # a long line is searched once, not once per chunk
                if not self.fill():
                    break
                nl = self.buf.find("\n", searched)
            end = len(self.buf) if nl < 0 else nl
            text = self.buf[self.pos : end]
            if text.strip():
                where = self.where(self.pos)
                try:
                    yield Located(_loads(text), where, top)
                except _DecodeError as exc:
                    yield Located(None, where, top, error=f"not valid JSON ({exc})")
                top += 1
            if nl < 0:
                self.pos = len(self.buf)
                return
            self.pos = nl + 1
