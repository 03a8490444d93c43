"""Streaming reader of OTLP JSON Lines: one ``ExportTraceServiceRequest`` object per line.

It yields parsed lines one at a time and never keeps more than one in memory, so what the
caller keeps is all that grows. A line is read with a bound (``max_line_bytes``, default
``DEFAULT_MAX_LINE_BYTES``): a longer one is an error, or with ``skip_invalid`` is skipped
without ever being held whole, so a gzip bomb of one endless line costs no more memory than
the limit. It only parses JSON (orjson when importable, else the standard library): nothing
read is ever evaluated.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from .._errors import ToolGuardError
from .escape import printable, short_id

try:
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
    _DecodeError: type[Exception] = orjson.JSONDecodeError
except ImportError:  # pragma: no cover - orjson is a dependency; the fallback keeps us usable
    import json

    _loads = json.loads
    _DecodeError = ValueError

STDIN = "-"
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line read, in bytes without its newline (64 MiB). An OTLP exporter's line is one
batch of spans: a few MB even for thousands of spans with recorded content."""
_SKIP_CHUNK = 1 << 20  # an over-long line being skipped is read and dropped 1 MiB at a time

ExportRequest = dict[str, Any]
"""One ``ExportTraceServiceRequest`` as parsed from JSON. Only ``resourceSpans`` is known to be
a list; what is below it is unchecked JSON, validated by whoever walks it."""

_Stream = BinaryIO | gzip.GzipFile


class ReportInputError(ToolGuardError):
    """The report's input is unusable: a file that cannot be read, a line that is not a
    trace export, an empty input. The message names the file and line when there is one."""


class BackendError(ReportInputError):
    """A trace backend could not be read: it is down, refused the request (HTTP 4xx/5xx) or
    answered something that is not a span export. The message names the URL and the answer."""


@dataclass
class ReadStats:
    """What a read went through, for the warnings under the report."""

    files: list[str] = field(default_factory=list)
    lines: int = 0
    spans: int = 0
    skipped: int = 0  # lines and spans skipped (skip_invalid)
    first_skipped: str | None = None  # the first of either
    # Of ``skipped``: the bad spans left out of lines whose other spans were read.
    skipped_spans: int = 0
    first_skipped_span: str | None = None
    first_skipped_line: str | None = None
    # Read only with cost (report/cost.py): model spans in traces of several trajectories,
    # and model spans whose token count is not a whole number.
    cost_unattributed_spans: int = 0
    cost_invalid_spans: int = 0

    def skip(self, where: str, why: str, *, span: bool = False) -> None:
        """Count a skipped line, or with ``span`` one bad span of a line otherwise read."""
        self.skipped += 1
        text = f"{where}: {why}"
        if self.first_skipped is None:
            self.first_skipped = text
        if span:
            self.skipped_spans += 1
            if self.first_skipped_span is None:
                self.first_skipped_span = text
        elif self.first_skipped_line is None:
            self.first_skipped_line = text

    def refuse(self, where: str, why: str, skip_invalid: bool) -> None:
        """Bad input at ``where``: an error naming it, or with ``skip_invalid`` counted."""
        if not skip_invalid:
            raise ReportInputError(f"{where}: {why}")
        self.skip(where, why)


def expand_paths(patterns: Iterable[str]) -> list[str]:
    """Expand globs (sorted, so a report does not depend on directory order); `-` is stdin.

    A pattern that names nothing is an error rather than an empty report: a typo in a path
    should not look like a cohort without trajectories."""
    paths: list[str] = []
    for pattern in patterns:
        if pattern == STDIN or os.path.exists(pattern):
            paths.append(pattern)
            continue
        matches = sorted(glob.glob(pattern, recursive=True))
        if not matches:
            raise ReportInputError(f"{pattern}: no such file (and no file matches it as a glob)")
        files = [m for m in matches if os.path.isfile(m)]
        if not files:  # else "no input files", naming no pattern
            folders = short_id(", ".join(matches), 200)
            raise ReportInputError(f"{pattern}: matches only folders ({folders}), no span file")
        paths.extend(files)
    return paths


def _open(path: str) -> _Stream:
    if path == STDIN:
        stream = sys.stdin.buffer
        # Standard input may itself be gzip: peek at the magic number rather than guess.
        peek = stream.peek(2)[:2] if isinstance(stream, io.BufferedReader) else b""
        return gzip.GzipFile(fileobj=stream) if peek == b"\x1f\x8b" else stream
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def _describe(obj: object) -> str:
    if isinstance(obj, dict):
        for other in ("resourceMetrics", "resourceLogs"):
            if other in obj:
                return f"an OTLP {other[8:].lower()} export, not a trace export"
        keys = ", ".join(short_id(str(k), 40) for k in sorted(map(str, obj))[:5]) or "no keys"
        return f"a JSON object without 'resourceSpans' ({keys}), not a trace export"
    return f"a JSON {type(obj).__name__}, not a trace export object"


class _Progress:
    """A one-line counter on stderr, only when stderr is a terminal."""

    def __init__(self, enabled: bool | None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._next = 0.0
        self._shown = False

    def update(self, path: str, stats: ReadStats) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + 0.2
        self._shown = True
        sys.stderr.write(
            f"\rreading {printable(path)}: {stats.lines:,} lines, {stats.spans:,} spans "
        )
        sys.stderr.flush()

    def done(self) -> None:
        if self._shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


FileReader = Callable[
    [_Stream, str, ReadStats, bool, _Progress, int], Iterator[tuple[ExportRequest, str]]
]
"""Reads one opened file: ``(stream, name, stats, skip_invalid, progress meter,
max_line_bytes)`` to ``(export request, "file:line")`` pairs, like ``_iter_file``."""


def iter_exports(
    patterns: Iterable[str],
    stats: ReadStats,
    *,
    skip_invalid: bool = False,
    progress: bool | None = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    choose: Callable[[_Stream, str], FileReader] | None = None,
) -> Iterator[tuple[ExportRequest, str]]:
    """Yield ``(export request, "file:line")`` for every non-blank line of every input.

    A line that is not JSON, JSON that is not a trace export, or a line longer than
    ``max_line_bytes`` raises ReportInputError naming the file and line, or with
    ``skip_invalid`` is counted in ``stats`` and passed over. ``stats.spans`` is left to the
    caller, which walks the spans anyway. ``choose(stream, name)`` picks the reader of each
    opened file (other formats, turned into export requests: toolguard/report/inputs.py);
    without it every file is OTLP JSON Lines."""
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
    paths = expand_paths(patterns)
    if not paths:
        raise ReportInputError("no input files")
    meter = _Progress(progress)
    try:
        for path in paths:
            name = "<stdin>" if path == STDIN else path
            stats.files.append(name)
            try:
                stream = _open(path)
            except OSError as exc:
                raise ReportInputError(f"{name}: cannot open: {exc.strerror or exc}") from None
            try:
                read = _iter_file if choose is None else choose(stream, name)
                yield from read(stream, name, stats, skip_invalid, meter, max_line_bytes)
            finally:
                if path != STDIN:
                    stream.close()
    finally:
        meter.done()


def iter_lines(
    stream: _Stream,
    name: str,
    stats: ReadStats,
    skip_invalid: bool,
    meter: _Progress,
    max_line_bytes: int,
) -> Iterator[tuple[bytes, str]]:
    """Yield ``(line, "file:line")`` for each non-blank line of ``stream`` within the bound.

    The one line loop of every file format: a line longer than ``max_line_bytes`` is refused
    (``ReadStats.refuse``) and, when skipped, dropped a chunk at a time, never held whole; a
    truncated or corrupt gzip file is an error naming the last line read."""
    lineno = 0
    readline = stream.readline
    cap = max_line_bytes + 1  # room for the newline: a line of exactly the limit is fine
    try:
        while line := readline(cap):
            lineno += 1
            stats.lines += 1
            if meter.enabled and not lineno & 255:
                meter.update(name, stats)
            if len(line) == cap and line[-1:] != b"\n":
                stats.refuse(
                    f"{name}:{lineno}",
                    f"line longer than {max_line_bytes:,} bytes (the line-length limit; "
                    "raise it with --max-line-bytes)",
                    skip_invalid,
                )
                del line
                while (rest := readline(_SKIP_CHUNK)) and rest[-1:] != b"\n":
                    pass
                continue
            if not line.isspace():
                yield line, f"{name}:{lineno}"
    except (OSError, EOFError, zlib.error) as exc:
        # A truncated or corrupt gzip file surfaces here, mid-iteration.
        raise ReportInputError(f"{name}: cannot read after line {lineno}: {exc}") from None


def _iter_file(
    stream: _Stream,
    name: str,
    stats: ReadStats,
    skip_invalid: bool,
    meter: _Progress,
    max_line_bytes: int,
) -> Iterator[tuple[ExportRequest, str]]:
    for line, where in iter_lines(stream, name, stats, skip_invalid, meter, max_line_bytes):
        why = None
        try:
            obj = _loads(line)
        except (_DecodeError, ValueError, UnicodeDecodeError) as exc:
            why = f"not valid JSON ({exc})"
        else:
            if not isinstance(obj, dict) or not isinstance(obj.get("resourceSpans"), list):
                why = _describe(obj)
        if why is not None:  # refused outside the except: no chained JSON error
            stats.refuse(where, why, skip_invalid)
            continue
        yield obj, where
