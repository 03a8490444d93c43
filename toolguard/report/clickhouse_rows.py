"""Spans as rows of ``otel_traces``, the table of the OpenTelemetry Collector's ClickHouse
exporter (opentelemetry-collector-contrib, ``exporter/clickhouseexporter``).

The exporter writes one row per span: ``TraceId`` and ``SpanId`` in hex, ``Duration`` in
nanoseconds (end - start), and every span attribute in ``SpanAttributes``, a
``Map(LowCardinality(String), String)``: each value turned into a string the way the
Collector's ``pcommon.Value.AsString`` does it (ints as decimals, booleans as ``true`` /
``false``, arrays as JSON). That is why the report reads string-typed values (docs/protocol.md
section 6.5).

Two directions:

- reading: ``row_to_request`` turns rows (a JSON Lines file from ``SELECT * FROM otel_traces
  FORMAT JSONEachRow``, or the dicts a client such as clickhouse-connect returns) into the OTLP
  export requests the rest of the report folds, so every reading rule applies unchanged;
- writing: ``request_to_rows`` turns OTLP export requests into rows shaped exactly like the
  exporter's, to load a table from span files (the tests and the SQL benchmark do).

Nothing read is ever evaluated: rows are parsed as JSON and their values only compared.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .escape import short
from .reader import (
    ExportRequest,
    ReadStats,
    ReportInputError,
    _loads,
    _Progress,
    _Stream,
    iter_lines,
)

ROW_KEYS = frozenset({"Timestamp", "TraceId", "SpanId", "SpanAttributes"})
"""A JSON object whose first key is one of these is an ``otel_traces`` row (``SELECT *``
starts with ``Timestamp``; a narrower ``SELECT`` with the ids or the attributes)."""
_NEEDED = ("TraceId", "SpanId", "SpanAttributes")

# Table of the exporter's current schema (exporter/clickhouseexporter/internal/sql_templates/
# traces_table.sql), with its column names, types, codecs, indexes, partitioning and order;
# `{table}` is the (already quoted) table name. Its TTL clause is optional there and left out.
OTEL_TRACES_DDL = """CREATE TABLE IF NOT EXISTS {table} (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1"""


# --- reading rows ------------------------------------------------------------------------


def row_to_request(row: Any) -> ExportRequest:
    """One ``otel_traces`` row as a one-span OTLP export request.

    Only the columns a figure needs are read: ``TraceId``, ``SpanId``, ``SpanAttributes``
    (every value a string) and ``Duration`` (nanoseconds, a number or a decimal string; used
    by ``--cost`` only). The span's start is set to 0 and its end to the duration: no figure
    reads absolute times. Raises ReportInputError (without a place: the caller knows it)
    when the row lacks one of the three columns or holds the wrong types."""
    if not isinstance(row, Mapping):
        raise ReportInputError(f"a JSON {type(row).__name__}, not an otel_traces row")
    missing = [c for c in _NEEDED if c not in row]
    if missing:
        keys = ", ".join(sorted(map(str, row))[:5]) or "no keys"
        raise ReportInputError(
            f"an otel_traces row needs the columns {', '.join(_NEEDED)}; this one lacks "
            f"{', '.join(missing)} (it has {short(keys)})"
        )
    trace, span, attrs = row["TraceId"], row["SpanId"], row["SpanAttributes"]
    if not isinstance(trace, str) or not isinstance(span, str):
        raise ReportInputError(f"TraceId and SpanId must be strings: {short([trace, span])}")
    if not isinstance(attrs, Mapping):
        raise ReportInputError(f"SpanAttributes must be a map of strings: {short(attrs)}")
    attributes = []
    for key, value in attrs.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ReportInputError(f"SpanAttributes must map strings to strings: {key!r}")
        attributes.append({"key": key, "value": {"stringValue": value}})
    duration = row.get("Duration", 0)
    if isinstance(duration, str) and duration.isascii() and duration.isdigit():
        duration = int(duration)  # UInt64 is quoted in JSON by some servers' settings
    if duration.__class__ is not int or duration < 0:
        raise ReportInputError(f"Duration must be a whole number of nanoseconds: {short(duration)}")
    out = {
        "traceId": trace,
        "spanId": span,
        "startTimeUnixNano": 0,
        "endTimeUnixNano": duration,
        "attributes": attributes,
    }
    return {"resourceSpans": [{"scopeSpans": [{"spans": [out]}]}]}


def iter_rows(
    rows: Iterable[Any], where: str = "row", stats: ReadStats | None = None
) -> Iterator[tuple[ExportRequest, str]]:
    """``(export request, "where N")`` for rows already parsed (e.g. a client's results);
    a bad row raises ReportInputError naming its number. ``stats.lines`` counts the rows."""
    for i, row in enumerate(rows, 1):
        if stats is not None:
            stats.lines += 1
        try:
            request = row_to_request(row)
        except ReportInputError as exc:
            raise ReportInputError(f"{where} {i}: {exc}") from None
        yield request, f"{where} {i}"


def iter_rows_file(
    stream: _Stream,
    name: str,
    stats: ReadStats,
    skip_invalid: bool,
    meter: _Progress,
    max_line_bytes: int,
) -> Iterator[tuple[ExportRequest, str]]:
    """Yield ``(export request, "file:line")`` for each row of a JSONEachRow file (the
    ``FileReader`` of toolguard/report/inputs.py). Lines are read with the same bound as
    OTLP files; a bad line stops the read or, with ``skip_invalid``, is counted and skipped."""
    for line, where in iter_lines(stream, name, stats, skip_invalid, meter, max_line_bytes):
        why = None
        try:
            request = row_to_request(_loads(line))
        except (ValueError, UnicodeDecodeError) as exc:
            why = f"not valid JSON ({exc})"
        except ReportInputError as exc:
            why = str(exc)
        if why is not None:
            stats.refuse(where, why, skip_invalid)
            continue
        yield request, where


# --- writing rows ------------------------------------------------------------------------

_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
_STATUS = ("Unset", "Ok", "Error")


def _enum(value: Any, names: tuple[str, ...], prefix: str) -> str:
    """An OTLP enum as the exporter writes it (``SpanKind.String()``): the JSON mapping
    carries the number, or the proto name such as ``SPAN_KIND_INTERNAL``."""
    if isinstance(value, str) and value.startswith(prefix):
        value = value[len(prefix) :].replace("_", "").lower()
        return next((n for n in names if n.lower() == value), names[0])
    if isinstance(value, int) and 0 <= value < len(names):
        return names[value]
    return names[0]


def _float_text(f: float) -> str:
    """A double as pcommon's ``AsString`` writes it: ES6 number-to-string (fixed notation
    between 1e-6 and 1e21, the shortest digits that read back the same)."""
    if math.isnan(f) or math.isinf(f):
        text = "NaN" if math.isnan(f) else ("+Inf" if f > 0 else "-Inf")
        return f"json: unsupported value: {text}"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    if 1e-6 <= abs(f) < 1e21:
        text = format(decimal.Decimal(repr(f)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    # repr is already the shortest digits in exponent form here ("1e-07", "1.5e+22"), as
    # Go's 'e' format; Go then writes a one-digit negative exponent without its zero.
    text = repr(f)
    mantissa, _, exponent = text.partition("e")
    if exponent.startswith("-0"):
        exponent = "-" + exponent[2:]
    return f"{mantissa}e{exponent}"


def _raw(value: Any) -> Any:
    """An OTLP AnyValue as a plain JSON value (``pcommon.Value.AsRaw``)."""
    if not isinstance(value, Mapping):
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [_raw(v) for v in (value["arrayValue"] or {}).get("values") or ()]
    if "kvlistValue" in value:
        kvs = (value["kvlistValue"] or {}).get("values") or ()
        return {kv["key"]: _raw(kv.get("value")) for kv in kvs}
    if "bytesValue" in value:
        return value["bytesValue"]  # base64 in the JSON mapping already
    return None


def value_text(value: Any) -> str:
    """An OTLP AnyValue as the exporter stores it in a ``Map(..., String)`` column."""
    if not isinstance(value, Mapping):
        return ""
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return "true" if value["boolValue"] else "false"
    if "intValue" in value:
        return str(int(value["intValue"]))
    if "doubleValue" in value:
        return _float_text(float(value["doubleValue"]))
    if "bytesValue" in value:
        raw = value["bytesValue"]
        return raw if isinstance(raw, str) else base64.b64encode(bytes(raw)).decode()
    if "arrayValue" in value or "kvlistValue" in value:
        return json.dumps(_raw(value), separators=(",", ":"), ensure_ascii=False)
    return ""


def _attributes(kvs: Any) -> dict[str, str]:
    return {kv["key"]: value_text(kv.get("value")) for kv in kvs or ()}


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _timestamp(ns: Any) -> str:
    """Nanoseconds since the epoch as ClickHouse prints a ``DateTime64(9)`` (UTC)."""
    n = int(ns or 0)
    seconds, frac = divmod(n, 1_000_000_000)
    when = _EPOCH + _dt.timedelta(seconds=seconds)
    return f"{when:%Y-%m-%d %H:%M:%S}.{frac:09d}"


def request_to_rows(request: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The ``otel_traces`` rows the exporter writes for one OTLP export request, as
    ``SELECT * ... FORMAT JSONEachRow`` prints them (a JSON object per row, columns in table
    order, ``Duration`` a number)."""
    for rs in request.get("resourceSpans") or ():
        resource = _attributes((rs.get("resource") or {}).get("attributes"))
        service = _service_name((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
            scope = ss.get("scope") or ss.get("instrumentationLibrary") or {}
            for span in ss.get("spans") or ():
                start = int(span.get("startTimeUnixNano") or 0)
                end = int(span.get("endTimeUnixNano") or 0)
                status = span.get("status") or {}
                events = span.get("events") or ()
                links = span.get("links") or ()
                yield {
                    "Timestamp": _timestamp(start),
                    "TraceId": span.get("traceId") or "",
                    "SpanId": span.get("spanId") or "",
                    "ParentSpanId": span.get("parentSpanId") or "",
                    "TraceState": span.get("traceState") or "",
                    "SpanName": span.get("name") or "",
                    "SpanKind": _enum(span.get("kind", 0), _KINDS, "SPAN_KIND_"),
                    "ServiceName": service,
                    "ResourceAttributes": resource,
                    "ScopeName": scope.get("name") or "",
                    "ScopeVersion": scope.get("version") or "",
                    "SpanAttributes": _attributes(span.get("attributes")),
                    # end - start in ns; a span that ends before it starts is stored as 0
                    # (the exporter's Go duration would be negative, which UInt64 cannot hold).
                    "Duration": max(0, end - start),
                    "StatusCode": _enum(status.get("code", 0), _STATUS, "STATUS_CODE_"),
                    "StatusMessage": status.get("message") or "",
                    "Events.Timestamp": [_timestamp(e.get("timeUnixNano")) for e in events],
                    "Events.Name": [e.get("name") or "" for e in events],
                    "Events.Attributes": [_attributes(e.get("attributes")) for e in events],
                    "Links.TraceId": [lk.get("traceId") or "" for lk in links],
                    "Links.SpanId": [lk.get("spanId") or "" for lk in links],
                    "Links.TraceState": [lk.get("traceState") or "" for lk in links],
                    "Links.Attributes": [_attributes(lk.get("attributes")) for lk in links],
                }


def _service_name(kvs: Any) -> str:
    for kv in kvs or ():
        if kv.get("key") == "service.name":
            value = kv.get("value") or {}
            # pcommon's Str() of anything but a string is "".
            raw = value.get("stringValue")
            return raw if isinstance(raw, str) else ""
    return ""


def insert_file_sql(table: str, path: str) -> str:
    """SQL that loads a JSONEachRow file of rows (``request_to_rows``) into ``table``, for
    engines that read local files (chdb, clickhouse-local); ``table`` is already quoted."""
    quoted = "'" + path.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"INSERT INTO {table} SELECT * FROM file({quoted}, 'JSONEachRow', {_STRUCTURE})"


_STRUCTURE = (
    "'Timestamp DateTime64(9), TraceId String, SpanId String, ParentSpanId String, "
    "TraceState String, SpanName String, SpanKind String, ServiceName String, "
    "ResourceAttributes Map(String, String), ScopeName String, ScopeVersion String, "
    "SpanAttributes Map(String, String), Duration UInt64, StatusCode String, "
    "StatusMessage String, `Events.Timestamp` Array(DateTime64(9)), "
    "`Events.Name` Array(String), `Events.Attributes` Array(Map(String, String)), "
    "`Links.TraceId` Array(String), `Links.SpanId` Array(String), "
    "`Links.TraceState` Array(String), `Links.Attributes` Array(Map(String, String))'"
)
