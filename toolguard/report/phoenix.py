"""Spans read back from Arize Phoenix: its span export, saved to a file or pulled live.

Phoenix answers ``GET /v1/projects/{project}/spans/otlpv1`` with one page of spans,
``{"data": [span, ...], "next_cursor": "..." | null}``, at most 1,000 spans a page, newest
first; the next page is asked for with ``?cursor=`` until ``next_cursor`` is null. Each span is
OTLP-shaped with snake_case keys (``trace_id``, ``span_id``, ``parent_span_id``,
``start_time_unix_nano``, ``attributes: [{"key", "value": {"string_value" | "int_value" |
"bool_value" | "double_value" | "array_value" | "bytes_value"}}]``, ``status: {"code",
"message"}``), every member present and null when unset. The pages are turned into the
camelCase ``ExportTraceServiceRequest`` objects the rest of the report reads, so every reading
rule (de-duplication by trace and span id, the summary span authoritative, the limits) applies
unchanged. Phoenix keeps no resource (the converted spans have an empty one) and answers
SPAN_KIND_INTERNAL for every span, whatever kind was sent (docs/backends.md).

A saved export is one page per line (JSON Lines, as pulled), or a single JSON document (one
page, possibly pretty-printed). Nothing read is ever evaluated: pages are parsed as JSON.
The live pull, over HTTP and bounded, is in ``phoenix_pull``; its names are importable from
here too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .escape import short
from .phoenix_pull import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_PAGES,
    DEFAULT_PAGE_SIZE,
    DEFAULT_TIMEOUT_S,
    MAX_DEADLINE_S,
    _describe,
    iter_phoenix_pages,
    spans_url,
)
from .reader import (
    DEFAULT_MAX_LINE_BYTES,
    BackendError,
    ExportRequest,
    ReadStats,
    ReportInputError,
    _loads,
    _Progress,
    _Stream,
    iter_lines,
)

__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_MAX_PAGES",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TIMEOUT_S",
    "MAX_DEADLINE_S",
    "iter_phoenix_file",
    "iter_phoenix_pages",
    "iter_phoenix_requests",
    "page_to_request",
    "spans_url",
]

# Phoenix's AnyValue members (snake_case) and their OTLP JSON names.
_VALUE_KEYS = {
    "string_value": "stringValue",
    "bool_value": "boolValue",
    "int_value": "intValue",
    "double_value": "doubleValue",
    "bytes_value": "bytesValue",
}
_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}


class _BadPage(Exception):
    """A page that is not Phoenix's span export."""


def _value(v: Any) -> dict[str, Any]:
    """Phoenix's AnyValue as an OTLP JSON AnyValue; null members dropped."""
    if not isinstance(v, dict):
        raise _BadPage(f"an attribute value is not an object: {short(v)}")
    for key, camel in _VALUE_KEYS.items():
        raw = v.get(key)
        if raw is not None:
            return {camel: raw}
    array = v.get("array_value")
    if array is not None:
        values = array.get("values") if isinstance(array, dict) else None
        if not isinstance(values, list) and values is not None:
            raise _BadPage(f"an array value is not a list: {short(array)}")
        return {"arrayValue": {"values": [_value(x) for x in values or ()]}}
    return {}  # every member null: an empty AnyValue, which no reader takes for ours


def _attributes(kvs: Any) -> list[dict[str, Any]]:
    if kvs is None:
        return []
    if not isinstance(kvs, list):
        raise _BadPage(f"attributes is not a list: {short(kvs)}")
    out = []
    for kv in kvs:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise _BadPage(f"an attribute is not a {{key, value}} object: {short(kv)}")
        out.append({"key": kv["key"], "value": _value(kv.get("value"))})
    return out


def _span(s: Any) -> dict[str, Any]:
    if not isinstance(s, dict):
        raise _BadPage(f"a span is not an object: {short(s)}")
    out: dict[str, Any] = {
        "traceId": s.get("trace_id") or "",
        "spanId": s.get("span_id") or "",
        "name": s.get("name") or "",
        "attributes": _attributes(s.get("attributes")),
    }
    if s.get("parent_span_id"):
        out["parentSpanId"] = s["parent_span_id"]
    kind = s.get("kind")
    if kind is not None:
        out["kind"] = _KINDS.get(kind, kind) if isinstance(kind, str) else kind
    for key, camel in (
        ("start_time_unix_nano", "startTimeUnixNano"),
        ("end_time_unix_nano", "endTimeUnixNano"),
    ):
        if s.get(key) is not None:
            out[camel] = s[key]
    status = s.get("status")
    if isinstance(status, dict):
        out["status"] = {k: v for k, v in status.items() if k in ("code", "message") and v}
    events = s.get("events")
    if isinstance(events, list):
        out["events"] = [
            {
                "name": e.get("name") or "",
                "timeUnixNano": e.get("time_unix_nano"),
                "attributes": _attributes(e.get("attributes")),
            }
            for e in events
            if isinstance(e, dict)
        ]
    return out


def page_to_request(page: Any) -> ExportRequest:
    """One page of Phoenix's span export as an OTLP JSON ``ExportTraceServiceRequest``.

    Raises ReportInputError (without a location: the caller adds it) when ``page`` is not
    ``{"data": [span, ...], ...}``."""
    try:
        if not isinstance(page, dict) or not isinstance(page.get("data"), list):
            raise _BadPage(_describe(page))
        spans = [_span(s) for s in page["data"]]
    except _BadPage as exc:
        raise ReportInputError(str(exc)) from None
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}


def iter_phoenix_file(
    stream: _Stream,
    name: str,
    stats: ReadStats,
    skip_invalid: bool,
    meter: _Progress,
    max_line_bytes: int,
) -> Iterator[tuple[ExportRequest, str]]:
    """Yield ``(export request, "file:line")`` for each page of a saved Phoenix export.

    One page per line; a file whose first non-blank line is not a whole JSON value is read as
    one document (a pretty-printed page) of at most ``max_line_bytes``."""
    first = True
    for line, where in iter_lines(stream, name, stats, skip_invalid, meter, max_line_bytes):
        try:
            page = _loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            if first:
                # No whole value on the first line: one document over several lines.
                yield from _document(stream, line, name, stats, skip_invalid, max_line_bytes)
                return
            stats.refuse(where, f"not valid JSON ({exc})", skip_invalid)
            continue
        first = False
        try:
            request = page_to_request(page)
        except ReportInputError as exc:
            stats.refuse(where, str(exc), skip_invalid)
            continue
        if meter.enabled:
            meter.update(name, stats)
        yield request, where


def _document(
    stream: _Stream,
    first: bytes,
    name: str,
    stats: ReadStats,
    skip_invalid: bool,
    max_line_bytes: int,
) -> Iterator[tuple[ExportRequest, str]]:
    text = first + stream.read(max_line_bytes + 1 - len(first))
    if len(text) > max_line_bytes:
        raise ReportInputError(
            f"{name}: a Phoenix export written over several lines is read whole, and this one "
            f"is larger than {max_line_bytes:,} bytes (raise it with --max-line-bytes, or save "
            "one page per line)"
        )
    stats.lines += text.count(b"\n") - first.count(b"\n")
    try:
        page = _loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{name}: not valid JSON ({exc})") from None
    try:
        request = page_to_request(page)
    except ReportInputError as exc:
        stats.refuse(name, str(exc), skip_invalid)
        return
    yield request, name


def iter_phoenix_requests(
    base_url: str,
    project: str,
    stats: ReadStats,
    *,
    api_key: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_page_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_pages: int = DEFAULT_MAX_PAGES,
    deadline: float = DEFAULT_DEADLINE_S,
) -> Iterator[tuple[ExportRequest, str]]:
    """The pages of :func:`iter_phoenix_pages` as export requests."""
    for page, where in iter_phoenix_pages(
        base_url,
        project,
        stats,
        api_key=api_key,
        page_size=page_size,
        timeout=timeout,
        max_page_bytes=max_page_bytes,
        max_pages=max_pages,
        deadline=deadline,
    ):
        try:
            yield page_to_request(page), where
        except ReportInputError as exc:
            raise BackendError(f"{where}: {exc}") from None
