"""The byte scanner under ``jsonstream``: a chunked buffer with line numbers, and the extent
of the next JSON value found without decoding it.

Linear in the input, whatever a value's length: the buffer is one chunk, replaced (not
appended to) when it runs out, and the text of a value that spans chunks is kept as a list of
pieces joined once at its end. The scanner's state (bracket depth, inside a string, an escape
cut by the chunk's end) survives the end of a chunk, so each byte is examined once; the
scanner this replaced re-scanned from the value's start and copied the buffer at every chunk,
quadratic in the value's length (377 s for a 32 MB unterminated string).
"""

from __future__ import annotations

import re
import sys
from typing import Protocol

from .model import ReplayInputError

_WS = re.compile(rb"\s*")
_PLAIN = re.compile(rb'[^"\[\]{}]*')  # anything that is neither a bracket nor a string
# A string's body up to its closing quote, or up to the chunk's end (then possibly stopping
# before a backslash that is the chunk's last byte): it never fails, so never backtracks.
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
# Inside a container: everything up to the next bracket, whole strings included, in one match,
# so the loop below runs once per bracket rather than once per string (2.4x faster on tau2's
# files). A string it cannot close (the chunk ends in it) is left to _STRING_BODY.
_TO_BRACKET = re.compile(rb'[^"\[\]{}]*(?:"[^"\\]*(?:\\.[^"\\]*)*"[^"\[\]{}]*)*', re.DOTALL)
_SCALAR_END = re.compile(rb"[\s,\]}]")
_QUOTE = ord('"')
_OPENERS = b"[{"
_UNBOUNDED = sys.maxsize


class Source(Protocol):
    """What is read from: a binary file, gzip's or standard input's."""

    def read(self, size: int = -1, /) -> bytes: ...


class _Text:
    """The text of the value being read: pieces kept up to ``limit`` bytes (None: nothing is
    kept), then refused, so an over-long value is never held whole."""

    __slots__ = ("error", "limit", "parts", "size")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.error: str | None = None

    def add(self, buf: bytes, start: int, end: int, what: str) -> None:
        self.size += end - start
        if self.limit is None:
            return
        if self.size > self.limit:
            self.refuse(
                f"{what} longer than {self.limit:,} bytes (the element limit; raise it with "
                "--max-element-bytes)"
            )
            return
        self.parts.append(buf[start:end] if start or end < len(buf) else buf)

    def refuse(self, why: str) -> None:
        if self.error is None:
            self.error = why
        self.limit = None
        self.parts = []

    def text(self) -> bytes | None:
        if self.limit is None:
            return None
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)


class Scanner:
    """A buffer of one chunk over a binary file, with the line number of any position in it
    from the current one on, and the extent of the next value or line."""

    def __init__(
        self, fh: Source, name: str, max_element_bytes: int, max_string_bytes: int, chunk: int
    ) -> None:
        self.fh = fh
        self.name = name
        self.max_element = max_element_bytes
        self.max_string = max_string_bytes
        self.chunk = chunk
        self.buf = b""
        self.pos = 0
        self.offset = 0  # of buf[0] in the input
        self.eof = False
        self._counted = 0  # newlines are counted up to this index of buf
        self._line = 1  # the line number at buf[_counted]
        self.line = 1  # where the value being read starts: named if memory runs out

    # -- buffer --------------------------------------------------------------------------
    def read(self) -> bytes:
        """The next chunk (empty at the end of the input); the buffer is left as it is."""
        if self.eof:
            return b""
        chunk = self.fh.read(self.chunk)
        if not chunk:
            self.eof = True
        return chunk

    def swap(self, chunk: bytes) -> None:
        """Make ``chunk`` the buffer: whoever needs the old one's bytes has taken them."""
        self.line_at(len(self.buf))
        self.offset += len(self.buf)
        self.buf = chunk
        self.pos = 0
        self._counted = 0

    def line_at(self, index: int) -> int:
        """The line of ``buf[index]``; indices are asked for in increasing order."""
        if index > self._counted:
            self._line += self.buf.count(b"\n", self._counted, index)
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
                return chr(self.buf[self.pos])
            chunk = self.read()
            if not chunk:
                return None
            self.swap(chunk)

    def expect(self, char: str, what: str) -> None:
        got = self.peek()
        if got != char:
            found = "the end of the input" if got is None else repr(got)
            raise self.fail(self.pos, f"expected {what}, found {found}")
        self.pos += 1

    # -- scanning ------------------------------------------------------------------------
    def raw(self, hold: bool = True) -> tuple[bytes | None, int, str | None]:
        """The next JSON value (consumed, not decoded; the caller has peeked: it is there):
        its text, the line it starts on, and why it is refused. Refused (over a bound) or not
        ``hold``, its text is None. Brackets and strings are tracked, the rest is left to the
        decoder."""
        start = self.pos
        line = self.line = self.line_at(start)
        text = _Text(self.max_element if hold else None)
        max_string = self.max_string if hold else _UNBOUNDED
        buf = self.buf
        first = buf[start]
        i = start
        if first == _QUOTE or first in _OPENERS:
            depth = 0
            in_string = escaped = False
            string_at = string_line = 0  # the open string's quote in the input, its line
            while True:
                n = len(buf)
                end = -1
                base = self.offset
                while i < n:
                    if in_string:
                        i = _STRING_BODY.match(buf, i).end()  # type: ignore[union-attr]
                        if i == n:
                            break
                        if buf[i] != _QUOTE:  # a backslash, the chunk's last byte
                            escaped = True
                            i = n
                            break
                        i += 1
                        in_string = False
                        if base + i - string_at > max_string:
                            text.refuse(self._long_string(string_line, string_at))
                            max_string = _UNBOUNDED
                        if depth == 0:
                            end = i
                            break
                        continue
                    # A string of this chunk can only be over the bound if the chunk is.
                    fast = depth and n - i <= max_string
                    i = (_TO_BRACKET if fast else _PLAIN).match(buf, i).end()  # type: ignore[union-attr]
                    if i == n:
                        break
                    char = buf[i]
                    i += 1
                    if char == _QUOTE:
                        in_string = True
                        string_at, string_line = base + i - 1, 0
                    elif char in _OPENERS:
                        depth += 1
                    else:
                        depth -= 1
                        if depth == 0:
                            end = i
                            break
                if end >= 0:
                    break
                # The chunk ends inside the value.
                if in_string:
                    string_line = string_line or self.line_at(string_at - base)
                    if base + n - string_at > max_string:
                        text.refuse(self._long_string(string_line, string_at))
                        max_string = _UNBOUNDED
                text.add(buf, start, n, "element")
                buf = self.read()
                if not buf:
                    what = "a string" if in_string else "this value"
                    raise ReplayInputError(f"{self.name}:{line}: the input ends inside {what}")
                self.swap(buf)
                start = 0
                i = 1 if escaped else 0
                escaped = False
        else:
            while (found := _SCALAR_END.search(buf, i)) is None:
                chunk = self.read()
                if not chunk:
                    break
                text.add(buf, start, len(buf), "element")
                self.swap(chunk)
                buf, start, i = chunk, 0, 0
            end = len(buf) if found is None else found.start()
            if end == start and not text.size:
                raise self.fail(start, f"expected a JSON value, found {chr(first)!r}")
        text.add(buf, start, end, "element")
        self.pos = end
        return text.text(), line, text.error

    def _long_string(self, known_line: int, string_at: int) -> str:
        line = known_line or self.line_at(string_at - self.offset)
        return (
            f"a string at line {line} longer than {self.max_string:,} bytes (the string "
            "limit; raise it with --max-string-bytes)"
        )

    def next_line(self) -> tuple[bytes | None, int, str | None, bool]:
        """The next line (consumed, without its newline): its text (None when longer than the
        bound: it is then read on without being held), its number, why it is refused, and
        whether more input follows it."""
        start = self.pos
        line = self.line = self.line_at(start)
        text = _Text(self.max_element)
        buf = self.buf
        searched = start
        while (nl := buf.find(b"\n", searched)) < 0:
            chunk = self.read()
            if not chunk:
                break
            text.add(buf, start, len(buf), "line")
            self.swap(chunk)
            buf, start, searched = chunk, 0, 0
        end = len(buf) if nl < 0 else nl
        text.add(buf, start, end, "line")
        self.pos = end if nl < 0 else nl + 1
        return text.text(), line, text.error, nl >= 0
