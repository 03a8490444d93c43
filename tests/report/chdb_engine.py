"""One embedded ClickHouse (chdb) for every test of the SQL report in a pytest process.

chdb runs one engine per process, on one data directory: every test uses this one (a chdb
session and clickhouse-connect's ``chdb://`` client share it). Tables are created per test
under unique names, loaded from OTLP span files through the exporter-shaped converter.
"""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from toolguard.report.build import Report, build_report, read_warnings
from toolguard.report.clickhouse import Row, Run
from toolguard.report.clickhouse_rows import OTEL_TRACES_DDL, insert_file_sql, request_to_rows
from toolguard.report.read import read_records

_engine: tuple[str, Any] | None = None
_names = itertools.count(1)


def engine() -> tuple[str, Any]:
    """(data directory, chdb session), made on first use and removed at exit."""
    global _engine
    if _engine is None:
        from chdb import session

        path = tempfile.mkdtemp(prefix="toolguard-chdb-")
        sess = session.Session(path)

        def close() -> None:
            sess.close()
            shutil.rmtree(path, ignore_errors=True)

        atexit.register(close)
        _engine = (path, sess)
    return _engine


def run(sql: str) -> Sequence[Row]:
    """The ``run`` of sql_report on the shared session (JSONEachRow, parsed)."""
    out = engine()[1].query(sql, "JSONEachRow")
    return [orjson.loads(line) for line in str(out).splitlines() if line.strip()]


RUN: Run = run


def to_rows(paths: Iterable[Path], rows_path: Path) -> Path:
    """The exporter's rows for OTLP files, as a JSONEachRow file."""
    with rows_path.open("wb") as out:
        for path in paths:
            for line in path.read_bytes().splitlines():
                if line.strip():
                    for row in request_to_rows(orjson.loads(line)):
                        out.write(orjson.dumps(row) + b"\n")
    return rows_path


def load(paths: Iterable[Path], tmp: Path, ddl: str = OTEL_TRACES_DDL) -> str:
    """A new table with the exporter's DDL holding the spans of ``paths``; its name."""
    table = f"otel_traces_{next(_names)}"
    rows = to_rows(paths, tmp / f"{table}.rows.jsonl")
    sess = engine()[1]
    sess.query(ddl.format(table=table))
    sess.query(insert_file_sql(table, str(rows)))
    return table


def python_report(paths: Sequence[Path], by: Sequence[str] = (), cost: bool = False) -> Report:
    """What ``toolguard report FILES --by ... [--cost] --format json`` computes."""
    records, stats = read_records([str(p) for p in paths], cost=cost)
    return build_report(records, by=by, warnings=read_warnings(stats), cost=cost)
