"""`toolguard report --clickhouse URL`: through clickhouse-connect (its chdb backend stands in
for a server) it prints exactly what the file report prints; a server that is down or
refuses, a table without a needed column and bad options are one line on stderr, exit 2."""

from __future__ import annotations

import contextlib
import http.server
import io
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("chdb", reason="chdb (embedded ClickHouse) comes with the dev extra")
pytest.importorskip("clickhouse_connect", reason="clickhouse-connect comes with the dev extra")

from chdb_engine import engine, load
from spanfiles import Writer, call, export, trajectory

from toolguard._cli import main


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["report", *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def spans(write_lines: Writer) -> Path:
    lines = []
    for i in range(12):
        validity = [True, "schema" if i % 3 else True, True][: 1 + i % 3]
        labels = {"model": f"m{i % 2}", "method": ("react", "plan")[i % 3 == 0]}
        lines.append(export(*trajectory(f"t{i:02d}", validity, i % 4 != 0, labels)))
    lines.append(export(call("lost", 1), call("lost", 2, False, "precondition")))
    return write_lines(lines)


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown"])
def test_the_same_output_as_the_file_report(spans: Path, tmp_path: Path, fmt: str) -> None:
    table = load([spans], tmp_path)
    url = f"chdb://{engine()[0]}"
    args = ("--by", "model,method", "--format", fmt, "--cost", "--quiet")
    code, out, err = cli("--clickhouse", url, "--table", table, *args)
    assert (code, err) == (0, "")
    assert out == cli(str(spans), *args)[1]


def test_where_is_passed_to_the_server(spans: Path, tmp_path: Path, write_lines: Writer) -> None:
    table = load([spans], tmp_path)
    where = "SpanAttributes['toolguard.trajectory.id'] IN ('t00', 't01')"
    code, out, _ = cli(
        "--clickhouse",
        f"chdb://{engine()[0]}",
        "--table",
        table,
        "--where",
        where,
        "--format",
        "json",
    )
    assert code == 0 and '"n": 2' in out


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_that_is_down() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    code, out, err = cli("--clickhouse", url)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith(f"toolguard: error: ClickHouse at {url}: no answer (")
    assert "Connection refused" in err and err.count("\n") == 1


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self._refuse()

    def do_POST(self) -> None:
        self._refuse()

    def _refuse(self) -> None:
        body = b"Code: 516. DB::Exception: default: Authentication failed. (AUTHENTICATION_FAILED)"
        self.send_response(403)
        self.send_header("X-ClickHouse-Exception-Code", "516")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_that_refuses(refusing_server: str) -> None:
    url = refusing_server.replace("http://", "http://agent:s3cret@")
    code, out, err = cli("--clickhouse", url)
    assert code == 2 and out == "" and "Traceback" not in err
    shown = refusing_server.replace("http://", "http://agent:***@")
    assert err.startswith(f"toolguard: error: ClickHouse at {shown}: ")
    assert "Authentication failed" in err and "s3cret" not in err


def test_a_table_missing_a_column(tmp_path: Path) -> None:
    sess = engine()[1]
    sess.query("CREATE TABLE no_attrs (TraceId String, SpanId String) ENGINE = Memory")
    code, _, err = cli("--clickhouse", f"chdb://{engine()[0]}", "--table", "no_attrs")
    assert code == 2 and "Traceback" not in err
    assert "table no_attrs has no column SpanAttributes" in err
    sess.query(
        "CREATE TABLE no_duration (TraceId String, SpanId String, "
        "SpanAttributes Map(String, String)) ENGINE = Memory"
    )
    code, _, err = cli("--clickhouse", f"chdb://{engine()[0]}", "--table", "no_duration", "--cost")
    assert code == 2 and "table no_duration has no column Duration" in err


def test_a_missing_table(tmp_path: Path) -> None:
    code, _, err = cli("--clickhouse", f"chdb://{engine()[0]}", "--table", "nowhere")
    assert code == 2 and "Traceback" not in err and "nowhere" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--clickhouse", "nonsense"], "not a ClickHouse URL"),
        (["--clickhouse", "http://x", "--table", "a;drop"], "--table table name 'a;drop'"),
        (["spans.jsonl", "--where", "1"], "--table and --where go with --clickhouse URL"),
        (["spans.jsonl", "--clickhouse", "http://x"], "give span files, --phoenix, --mlflow or"),
        (["--clickhouse", "http://x", "--outcomes", "o.csv"], "--outcomes is not joined"),
    ],
)
def test_bad_options(argv: list[str], message: str) -> None:
    code, out, err = cli(*argv)
    assert code == 2 and out == "" and message in err and "Traceback" not in err


def test_the_exporters_json_mode_is_refused_in_one_line() -> None:
    """The exporter's JSON mode (SpanAttributes JSON) used to end in an engine error about
    Map functions; it is named instead, before any query runs."""
    sess = engine()[1]
    sess.query(
        "CREATE TABLE json_attrs (TraceId String, SpanId String, SpanAttributes JSON, "
        "Duration UInt64) ENGINE = Memory"
    )
    sess.query(
        "INSERT INTO json_attrs VALUES ('t', 's', '{\"toolguard.trajectory.id\": \"a\", "
        '"toolguard.trajectory.length": "0", "toolguard.trajectory.first_error_depth": '
        '"1"}\', 1)'
    )
    code, _, err = cli("--clickhouse", f"chdb://{engine()[0]}", "--table", "json_attrs")
    assert code == 2 and "Traceback" not in err
    assert err.count("\n") == 1
    assert "table json_attrs stores SpanAttributes as JSON (the Collector ClickHouse " in err
    assert "exporter's JSON mode), which the report does not read" in err
