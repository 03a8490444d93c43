"""Recorded runs out of JSON files, one run in memory at a time.

A tau2 results file or a tau-bench list of runs is one JSON document of many megabytes; a
log is JSON Lines. Both are read without loading the whole file: a document's top-level array
(or one named member of its top-level object, tau2's ``simulations``) is cut into elements
by a scanner that only tracks brackets and strings, and each element is decoded on its own.
So a malformed element is reported with its line and can be skipped, and memory holds the
element being read, not the file.

Files named ``*.jsonl`` / ``*.ndjson`` (optionally ``.gz``) are read line by line, and so is
any file a caller says is JSON Lines (BFCL's result files, named ``.json``). Any other file is
a JSON document, except that a first value alone on its first line followed by more lines is
taken as JSON Lines too (a log saved as ``.json``). ``-`` is standard input.

Bounds, as the report's reader has (docs/report-limits.md): the text of one value that is
decoded (a JSON Lines line, an element of the streamed array, a top-level value or a kept
member) is at most ``max_element_bytes``, and one string in a document at most
``max_string_bytes``. A value over either is reported with the limit and its line, like a
value that does not decode, and the rest of it is scanned without being held. A member
nobody reads (tau2's task list) is scanned, never held, so it has no bound. The file is read
in chunks of ``CHUNK`` bytes and each byte is scanned once, so time is linear in the input.
Memory running out is a :class:`ReplayMemoryError`, never "not valid JSON".
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ._scan import Scanner
from .model import ReplayInputError, ReplayMemoryError

try:
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
    _DecodeError: tuple[type[Exception], ...] = (orjson.JSONDecodeError, ValueError)
except ImportError:  # pragma: no cover - orjson is a dependency of the package
    _loads = json.loads
    # The standard library's decoder recurses: too deep a value is invalid input too.
    _DecodeError = (ValueError, RecursionError)

__all__ = [
    "CHUNK",
    "DEFAULT_MAX_ELEMENT_BYTES",
    "DEFAULT_MAX_STRING_BYTES",
    "STDIN",
    "Located",
    "iter_values",
]

CHUNK = 1 << 20
STDIN = "-"
DEFAULT_MAX_ELEMENT_BYTES = 64 * 1024 * 1024
"""The longest text of one decoded value, in bytes (64 MiB): a JSON Lines line without its
newline, or one element of a document. One recorded run is a few MB even with long tool
answers; the report's line limit is the same."""
DEFAULT_MAX_STRING_BYTES = 16 * 1024 * 1024
"""The longest string of a document, quotes and escapes counted, in bytes (16 MiB): more
than a model's whole context window, so no real message or tool answer."""
_LINE_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")
# orjson reports an allocation that failed as a decode error ("Not enough memory to allocate
# buffer for parsing"); its messages never quote the input, so these words are its own.
_NO_MEMORY = ("not enough memory", "memory allocation")


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


def open_binary(path: str) -> BinaryIO | gzip.GzipFile:
    if path == STDIN:
        return sys.stdin.buffer
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "rb")
        return open(path, "rb")
    except OSError as exc:
        raise ReplayInputError(f"{path}: cannot open: {exc.strerror or exc}") from None


def iter_values(
    path: str,
    *,
    stream_key: str | None = None,
    keep: frozenset[str] | None = None,
    max_element_bytes: int = DEFAULT_MAX_ELEMENT_BYTES,
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES,
    json_lines: bool = False,
) -> Iterator[Located]:
    """The values of one file (see the module's docstring). ``stream_key``: the member of a
    top-level object whose array is streamed; ``keep``: the other members worth decoding
    (None: all of them), handed on as ``header``. ``json_lines``: one value per line whatever
    the file's name. The two bounds are in bytes."""
    for bound, flag in ((max_element_bytes, "element"), (max_string_bytes, "string")):
        if bound < 1:
            raise ValueError(f"max_{flag}_bytes must be >= 1, got {bound}")
    name = "<stdin>" if path == STDIN else path
    fh = open_binary(path)
    try:
        reader = _Reader(fh, name, max_element_bytes, max_string_bytes)
        try:
            if json_lines or path.endswith(_LINE_SUFFIXES):
                yield from reader.lines(0)
            else:
                yield from reader.document(stream_key, keep)
        except (OSError, EOFError, zlib.error) as exc:
            raise ReplayInputError(f"{name}: cannot read: {exc}") from None
        except MemoryError as exc:
            if isinstance(exc, ReplayMemoryError):
                raise
            raise ReplayMemoryError(
                f"{name}:{reader.line}: out of memory while reading this value"
            ) from None
    finally:
        if path != STDIN:
            fh.close()


class _Reader(Scanner):
    """The two shapes of file, over the scanner's buffer, and the decoding of each value."""

    def __init__(
        self,
        fh: BinaryIO | gzip.GzipFile,
        name: str,
        max_element_bytes: int = DEFAULT_MAX_ELEMENT_BYTES,
        max_string_bytes: int = DEFAULT_MAX_STRING_BYTES,
    ) -> None:
        super().__init__(fh, name, max_element_bytes, max_string_bytes, CHUNK)

    def decode(self, text: bytes, where: str) -> tuple[Any, str | None]:
        """The value of ``text`` and None, or None and why it is not JSON. Memory running
        out raises: orjson says so as a decode error, which is not the input's fault."""
        try:
            return _loads(text), None
        except _DecodeError as exc:
            if any(words in str(exc).lower() for words in _NO_MEMORY):
                raise ReplayMemoryError(
                    f"{where}: out of memory decoding this value ({len(text):,} bytes): {exc}"
                ) from None
            try:
                text.decode("utf-8")
            except UnicodeDecodeError as bad:
                raise ReplayInputError(f"{where}: not UTF-8 text: {bad}") from None
            return None, f"not valid JSON ({exc})"
        except MemoryError:
            raise ReplayMemoryError(
                f"{where}: out of memory decoding this value ({len(text):,} bytes)"
            ) from None

    def decoded(self, top: int, element: int | None, header: Mapping[str, Any]) -> Located:
        text, line, error = self.raw()
        where = f"{self.name}:{line}"
        if text is None:
            return Located(None, where, top, element, header, error)
        value, error = self.decode(text, where)
        return Located(value, where, top, element, header, error)

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
                key_text, line, error = self.raw()
                at = f"{self.name}:{line}"
                if key_text is None:
                    raise ReplayInputError(f"{at}: member name: {error}")
                key, error = self.decode(key_text, at)
                if error is not None:
                    raise ReplayInputError(f"{at}: member name: {error}")
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
                    self.raw(hold=False)  # a member nobody reads (tau2's task list): dropped
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
        """One value per line from here on; a line that does not decode, or is longer than
        the bound, is reported alone."""
        while True:
            text, line, error, more = self.next_line()
            where = f"{self.name}:{line}"
            if text is None:
                yield Located(None, where, top, error=error)
                top += 1
            elif text.strip():
                value, error = self.decode(text, where)
                yield Located(value, where, top, error=error)
                top += 1
            if not more:
                return
