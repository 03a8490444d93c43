"""Which reader reads a span file: OTLP JSON Lines, a saved Phoenix span export, or rows of
ClickHouse's ``otel_traces`` table (``SELECT * ... FORMAT JSONEachRow``).

Every format is turned into OTLP JSON ``ExportTraceServiceRequest`` objects, so the reading
rules of collect.py apply to all of them alike. ``auto`` looks at the first key of the file's
first JSON object (without consuming anything): ``resourceSpans`` is OTLP, ``data`` or
``next_cursor`` is Phoenix's export, ``Timestamp``, ``TraceId``, ``SpanId`` or
``SpanAttributes`` an ``otel_traces`` row. Anything else is read as OTLP, whose reader then
says what is wrong with the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .clickhouse_rows import ROW_KEYS, iter_rows_file
from .phoenix import iter_phoenix_file
from .reader import FileReader, _iter_file, _Stream

INPUT_FORMATS = ("auto", "otlp", "phoenix", "clickhouse")
_READERS: dict[str, FileReader] = {
    "otlp": _iter_file,
    "phoenix": iter_phoenix_file,
    "clickhouse": iter_rows_file,
}
_FIRST_KEY = re.compile(rb'\A\s*\{\s*"([^"\\]{1,64})"')
_PEEK = 4096
_PHOENIX_KEYS = (b"data", b"next_cursor")


def detect_format(stream: _Stream) -> str:
    """``"phoenix"`` or ``"otlp"``, from the first bytes of ``stream`` (left unread)."""
    peek = getattr(stream, "peek", None)
    head: bytes = peek(_PEEK)[:_PEEK] if peek is not None else b""
    match = _FIRST_KEY.match(head)
    if match is not None and match.group(1) in _PHOENIX_KEYS:
        return "phoenix"
    if match is not None and match.group(1).decode() in ROW_KEYS:
        return "clickhouse"
    return "otlp"


def chooser(input_format: str) -> Callable[[_Stream, str], FileReader]:
    """The ``choose`` argument of ``reader.iter_exports`` for ``input_format``."""
    if input_format not in INPUT_FORMATS:
        raise ValueError(
            f"input_format must be one of {', '.join(INPUT_FORMATS)}, got {input_format!r}"
        )

    def choose(stream: _Stream, name: str) -> FileReader:
        fmt = detect_format(stream) if input_format == "auto" else input_format
        return _READERS[fmt]

    return choose
