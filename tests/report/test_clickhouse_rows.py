"""otel_traces rows: the converter writes what the Collector's ClickHouse exporter writes, and
the Python report reads the rows (a JSONEachRow file, or rows a client returns) to the same
figures as the original OTLP JSON Lines file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spanfiles import Writer, call, export, span, trajectory

from toolguard import _contract as A
from toolguard.report.clickhouse_rows import OTEL_TRACES_DDL, request_to_rows, value_text
from toolguard.report.read import read_records, read_rows
from toolguard.report.reader import ReportInputError

EXPORTER_COLUMNS = [
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
    "Links.TraceId",
    "Links.SpanId",
    "Links.TraceState",
    "Links.Attributes",
]


def test_values_as_the_exporter_writes_them() -> None:
    assert value_text({"stringValue": "x"}) == "x"
    assert value_text({"intValue": "3"}) == "3" and value_text({"intValue": 3}) == "3"
    assert value_text({"boolValue": True}) == "true"
    assert value_text({"doubleValue": 3.0}) == "3"
    assert value_text({"doubleValue": 0.1}) == "0.1"
    assert value_text({"doubleValue": 1e21}) == "1e+21"
    assert value_text({"doubleValue": 1e-7}) == "1e-7"
    arr = {"arrayValue": {"values": [{"stringValue": "schema.args"}, {"intValue": "2"}]}}
    assert value_text(arr) == '["schema.args",2]'
    assert value_text({}) == ""


def test_a_row_has_the_exporter_columns_and_types() -> None:
    s = call("t", 2, False, "schema", trace="ab" * 16, span_id="cd" * 8)
    s.update(parentSpanId="ef" * 8, startTimeUnixNano="1796000000123456789")
    s["endTimeUnixNano"] = str(1796000000123456789 + 90_000)
    s["status"] = {"code": 2, "message": "blocked"}
    s["attributes"].append(
        {"key": A.FAILED_CHECKS, "value": {"arrayValue": {"values": [{"stringValue": "x.y"}]}}}
    )
    (row,) = request_to_rows(export(s))
    assert list(row) == EXPORTER_COLUMNS
    assert row["Timestamp"] == "2026-11-30 00:53:20.123456789"
    assert (row["TraceId"], row["SpanId"], row["ParentSpanId"]) == ("ab" * 16, "cd" * 8, "ef" * 8)
    assert (row["SpanKind"], row["StatusCode"], row["StatusMessage"]) == (
        "Internal",
        "Error",
        "blocked",
    )
    assert (row["ServiceName"], row["ScopeName"], row["Duration"]) == ("test", "toolguard", 90_000)
    attrs = row["SpanAttributes"]
    assert attrs[A.STEP] == "2" and attrs[A.VALID] == "false" and attrs[A.CAUSE] == "schema"
    assert json.loads(attrs[A.FAILED_CHECKS]) == ["x.y"]
    assert all(isinstance(v, str) for v in attrs.values())


def test_rows_load_into_the_exporter_table_unchanged(tmp_path: Path) -> None:
    """What the converter writes is what ClickHouse gives back from the exporter's table."""
    pytest.importorskip("chdb", reason="chdb (embedded ClickHouse) comes with the dev extra")
    from chdb_engine import RUN, load

    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(export(*trajectory("a", [True, "dependency"], True))) + "\n")
    table = load([path], tmp_path)
    got = RUN(f"SELECT * FROM {table} ORDER BY SpanName, SpanId")
    want = sorted(
        request_to_rows(json.loads(path.read_text())), key=lambda r: (r["SpanName"], r["SpanId"])
    )
    assert [dict(r) for r in got] == want
    described = [r["name"] for r in RUN(f"DESCRIBE TABLE {table}")]
    assert described == EXPORTER_COLUMNS
    assert "Map(LowCardinality(String), String)" in OTEL_TRACES_DDL


def _rows_file(src: Path, dst: Path) -> Path:
    with dst.open("w") as out:
        for line in src.read_text().splitlines():
            for row in request_to_rows(json.loads(line)):
                out.write(json.dumps(row) + "\n")
    return dst


def _quirky(write_lines: Writer) -> Path:
    spans = trajectory("a", [True, "schema", True], False, {"model": "m"})
    return write_lines(
        [
            export(*spans),
            export(*reversed(spans)),  # duplicates
            export(call("x", 1), call("x", 2, False, "precondition")),  # no summary
            export(*trajectory("b", ["information"], True, {"model": "n"})),
            export(span({"http.method": "GET"})),
        ]
    )


def test_a_rows_file_reads_like_the_otlp_file(write_lines: Writer, tmp_path: Path) -> None:
    otlp = _quirky(write_lines)
    rows = _rows_file(otlp, tmp_path / "rows.jsonl")
    want, _ = read_records([str(otlp)])
    assert read_records([str(rows)])[0] == want  # told apart by the first key
    assert read_records([str(rows)], input_format="clickhouse")[0] == want
    assert [r.call_spans for r in read_records([str(rows)])[0]] == [r.call_spans for r in want]


def test_rows_from_a_client_read_like_the_otlp_file(write_lines: Writer) -> None:
    otlp = _quirky(write_lines)
    rows = [r for line in otlp.read_text().splitlines() for r in request_to_rows(json.loads(line))]
    # A client returns maps as dicts and UInt64 as ints; JSON output may quote UInt64.
    for r in rows[::2]:
        r["Duration"] = str(r["Duration"])
    records, stats = read_rows(rows)
    assert records == read_records([str(otlp)])[0]
    assert stats.spans == len(rows)


def test_bad_rows_name_their_line(write_lines: Writer, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"TraceId": "a", "SpanId": "b"}\n')
    with pytest.raises(ReportInputError, match=r"rows\.jsonl:1: .*lacks SpanAttributes"):
        read_records([str(path)])
    path.write_text('{"TraceId": "a", "SpanId": "b", "SpanAttributes": {"k": 1}}\n')
    with pytest.raises(ReportInputError, match=r"rows\.jsonl:1: SpanAttributes must map"):
        read_records([str(path)])
    with pytest.raises(ReportInputError, match=r"row 1: TraceId and SpanId must be strings"):
        read_rows([{"TraceId": 1, "SpanId": "b", "SpanAttributes": {}}])


def test_rows_out_of_clickhouse_read_like_the_otlp_file(
    write_lines: Writer, tmp_path: Path
) -> None:
    """The rows as ClickHouse gives them back: `SELECT * ... FORMAT JSONEachRow` saved to a
    file, and the rows clickhouse-connect pulls from the server (its chdb backend here)."""
    pytest.importorskip("chdb", reason="chdb (embedded ClickHouse) comes with the dev extra")
    pytest.importorskip("clickhouse_connect", reason="clickhouse-connect comes with dev")
    import clickhouse_connect
    from chdb_engine import engine, load

    otlp = _quirky(write_lines)
    want, _ = read_records([str(otlp)])
    table = load([otlp], tmp_path)
    saved = tmp_path / "select.jsonl"
    saved.write_bytes(engine()[1].query(f"SELECT * FROM {table}", "JSONEachRow").bytes())
    assert read_records([str(saved)])[0] == want
    client = clickhouse_connect.get_client(dsn=f"chdb://{engine()[0]}")
    try:
        pulled = list(client.query(f"SELECT * FROM {table}").named_results())
    finally:
        client.close()
    assert isinstance(pulled[0]["SpanAttributes"], dict)
    assert read_rows(pulled)[0] == want
