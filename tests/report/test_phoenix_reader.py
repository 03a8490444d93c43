"""Phoenix's span export read by the report, without Phoenix: a real export captured from a
running Phoenix (tests/data/phoenix-export.jsonl, by tests/backends with
TOOLGUARD_CAPTURE_FIXTURES=1) beside the same spans as the file export wrote them
(tests/data/phoenix-original.jsonl), and a local HTTP server that plays Phoenix's REST API or
refuses."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toolguard._cli import main
from toolguard.report.build import build_report
from toolguard.report.phoenix import page_to_request, spans_url
from toolguard.report.read import read_phoenix, read_records
from toolguard.report.reader import BackendError, ReportInputError

DATA = Path(__file__).resolve().parents[1] / "data"
EXPORT = DATA / "phoenix-export.jsonl"
ORIGINAL = DATA / "phoenix-original.jsonl"
PROJECT = "toolguard roundtrip ü"  # quoted in the URL path


def _pages() -> list[dict[str, Any]]:
    return [json.loads(line) for line in EXPORT.read_bytes().splitlines() if line.strip()]


def _all_spans() -> list[dict[str, Any]]:
    return [s for page in _pages() for s in page["data"]]


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- the captured export, read from files ---------------------------------------------------


def test_the_fixture_is_a_real_multi_page_export() -> None:
    pages = _pages()
    assert len(pages) > 1 and all(p["next_cursor"] for p in pages[:-1])
    assert pages[-1]["next_cursor"] is None
    names = {s["name"] for s in _all_spans()}
    assert "toolguard.trajectory" in names and "execute_tool send_message" in names


@pytest.mark.parametrize("by", [[], ["method"], ["model", "method"]])
def test_figures_equal_the_original_file(by: list[str]) -> None:
    from_phoenix, stats = read_records([str(EXPORT)])
    original, original_stats = read_records([str(ORIGINAL)])
    assert stats.spans == original_stats.spans > 100
    assert from_phoenix == original
    assert build_report(from_phoenix, by=by) == build_report(original, by=by)


@pytest.mark.parametrize("flag", [[], ["--input-format", "phoenix"]])
def test_cli_reads_the_export_like_the_original(
    flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--by", "method", "--format", "json"]
    code, from_phoenix, err = _report([str(EXPORT), *flag, *args], capsys)
    assert code == 0, err
    assert from_phoenix == _report([str(ORIGINAL), *args], capsys)[1]


def test_a_pretty_printed_single_page_reads_the_same(tmp_path: Path) -> None:
    page = {"data": _all_spans(), "next_cursor": None}
    path = tmp_path / "page.json"
    path.write_text(json.dumps(page, indent=2))
    assert read_records([str(path)])[0] == read_records([str(ORIGINAL)])[0]


def test_gzip_and_mixed_inputs(tmp_path: Path) -> None:
    """Each file is told apart on its own: a gzip'd Phoenix export beside an OTLP file."""
    gz = tmp_path / "export.jsonl.gz"
    gz.write_bytes(gzip.compress(EXPORT.read_bytes()))
    both, _ = read_records([str(gz), str(ORIGINAL)])
    # The same spans twice (trace and span ids equal): de-duplicated, figures unchanged.
    assert both == read_records([str(ORIGINAL)])[0]


def test_standard_input_is_detected_too() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", "-", "--format", "json"],
        input=EXPORT.read_bytes(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    expected = build_report(read_records([str(ORIGINAL)])[0])
    assert json.loads(done.stdout)["overall"]["n"] == expected["overall"]["n"]
    assert json.loads(done.stdout)["overall"]["ter"] == expected["overall"]["ter"]


def test_a_page_repeated_changes_no_figure(tmp_path: Path) -> None:
    lines = EXPORT.read_bytes().splitlines(keepends=True)
    path = tmp_path / "twice.jsonl"
    path.write_bytes(b"".join(lines + lines[:2]))
    assert read_records([str(path)])[0] == read_records([str(ORIGINAL)])[0]


# --- bad files --------------------------------------------------------------------------------


def test_otlp_forced_on_a_phoenix_file_says_what_it_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _report([str(EXPORT), "--input-format", "otlp"], capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"{EXPORT}:1: a JSON object without 'resourceSpans' (data, next_cursor)" in err


def test_phoenix_forced_on_an_otlp_file_says_what_it_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _report([str(ORIGINAL), "--input-format", "phoenix"], capsys)
    assert code == 2 and "Traceback" not in err
    assert f"{ORIGINAL}:1: an OTLP trace export, not a Phoenix span export" in err


def test_a_broken_page_is_named_by_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = EXPORT.read_bytes().splitlines(keepends=True)
    path = tmp_path / "broken.jsonl"
    path.write_bytes(lines[0] + b'{"data": [{"attributes": 7}], "next_cursor": null}\n' + lines[1])
    code, _, err = _report([str(path)], capsys)
    assert code == 2 and f"{path}:2: attributes is not a list: 7" in err
    code, out, err = _report([str(path), "--skip-invalid", "--format", "json"], capsys)
    assert code == 0, err
    assert any("1 invalid input lines skipped" in w for w in json.loads(out)["warnings"])


def test_a_page_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = tmp_path / "half.jsonl"
    lines = EXPORT.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[1][:500] + b"\n")
    with pytest.raises(ReportInputError, match=rf"{path.name}:2: not valid JSON"):
        read_records([str(path)])


def test_a_document_over_several_lines_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "data": [\n    {"trace_id": \n')
    with pytest.raises(ReportInputError, match=rf"{path.name}: not valid JSON"):
        read_records([str(path)])


def test_a_document_larger_than_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"data": _all_spans(), "next_cursor": None}, indent=1))
    with pytest.raises(ReportInputError, match="larger than 10,000 bytes"):
        read_records([str(path)], max_line_bytes=10_000)


def test_value_conversion() -> None:
    def value(v: dict[str, Any]) -> dict[str, Any]:
        nulls = dict.fromkeys(("array_value", "bool_value", "bytes_value", "double_value",
                               "int_value", "kvlist_value", "string_value"))  # fmt: skip
        span = {"trace_id": "ab", "span_id": "cd", "attributes": [{"key": "k", "value": nulls | v}]}
        request = page_to_request({"data": [span], "next_cursor": None})
        out: dict[str, Any] = request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        return dict(out["attributes"][0]["value"])

    assert value({"int_value": 3}) == {"intValue": 3}
    assert value({"int_value": "3"}) == {"intValue": "3"}
    assert value({"bool_value": False}) == {"boolValue": False}
    assert value({"double_value": 0.25}) == {"doubleValue": 0.25}
    assert value({"string_value": ""}) == {"stringValue": ""}
    assert value({"array_value": {"values": [{"string_value": "a"}, {"int_value": 1}]}}) == {
        "arrayValue": {"values": [{"stringValue": "a"}, {"intValue": 1}]}
    }
    assert value({}) == {}


# --- the live pull, against a local server playing Phoenix --------------------------------


class _Phoenix(BaseHTTPRequestHandler):
    """Serves the captured spans in pages of ``limit``, the cursor being an offset; or, with
    ``refuse`` set, answers every request with that status and body."""

    spans: ClassVar[list[dict[str, Any]]] = []
    refuse: ClassVar[tuple[int, bytes, str] | None] = None
    requests: ClassVar[list[tuple[str, dict[str, list[str]], str | None]]] = []
    repeat_cursor: ClassVar[bool] = False

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        type(self).requests.append((url.path, query, self.headers.get("Authorization")))
        if self.refuse is not None:
            status, body, ctype = self.refuse
            return self._send(status, body, ctype)
        if url.path != "/prefix/v1/projects/toolguard%20roundtrip%20%C3%BC/spans/otlpv1":
            return self._send(404, b'{"detail":"Project not found"}', "application/json")
        limit, start = int(query["limit"][0]), int(query.get("cursor", ["0"])[0])
        data = self.spans[start : start + limit]
        more = start + limit < len(self.spans)
        cursor = str(start if self.repeat_cursor else start + limit) if more else None
        body = json.dumps({"data": data, "next_cursor": cursor}).encode()
        self._send(200, body, "application/json")

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def fake_phoenix() -> Iterator[str]:
    _Phoenix.spans = _all_spans()
    _Phoenix.refuse, _Phoenix.requests, _Phoenix.repeat_cursor = None, [], False
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Phoenix)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/prefix/"
    finally:
        server.shutdown()
        server.server_close()


def test_pull_follows_the_cursor_and_reads_like_the_file(fake_phoenix: str) -> None:
    records, stats = read_phoenix(fake_phoenix, PROJECT, page_size=17, api_key="s3cret")
    assert records == read_records([str(ORIGINAL)])[0]
    n = len(_all_spans())
    assert stats.lines == -(-n // 17) == len(_Phoenix.requests)
    assert stats.files == [spans_url(fake_phoenix, PROJECT)]
    assert [q.get("cursor") for _, q, _ in _Phoenix.requests[:2]] == [None, ["17"]]
    assert {q["limit"][0] for _, q, _ in _Phoenix.requests} == {"17"}
    assert {auth for _, _, auth in _Phoenix.requests} == {"Bearer s3cret"}


def test_cli_pull_with_an_api_key_from_the_environment(
    fake_phoenix: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_PHOENIX_KEY", "k-123")
    args = ["--by", "method", "--format", "json"]
    pulled = ["--phoenix", fake_phoenix, "--project", PROJECT, "--api-key-env", "MY_PHOENIX_KEY"]
    code, out, err = _report([*pulled, *args], capsys)
    assert code == 0, err
    assert out == _report([str(ORIGINAL), *args], capsys)[1]
    assert _Phoenix.requests and {a for _, _, a in _Phoenix.requests} == {"Bearer k-123"}


def test_no_authorization_header_without_a_key(fake_phoenix: str) -> None:
    read_phoenix(fake_phoenix, PROJECT)
    assert [auth for _, _, auth in _Phoenix.requests] == [None]


def test_a_span_that_breaks_the_contract_names_its_page(fake_phoenix: str) -> None:
    spans = _all_spans()
    bad = json.loads(json.dumps(spans[0]))
    bad["span_id"] = "00000000000000ff"
    bad["attributes"] = [
        {"key": "toolguard.trajectory.id", "value": {"string_value": "x"}},
        {"key": "toolguard.step", "value": {"int_value": -3}},
        {"key": "toolguard.valid", "value": {"bool_value": True}},
    ]
    _Phoenix.spans = [*spans[:10], bad, *spans[10:]]
    with pytest.raises(ReportInputError, match=r"otlpv1 page 2: toolguard.step must be >= 1"):
        read_phoenix(fake_phoenix, PROJECT, page_size=10)
    records, stats = read_phoenix(fake_phoenix, PROJECT, page_size=10, skip_invalid=True)
    assert stats.skipped == stats.skipped_spans == 1 and stats.first_skipped is not None
    assert "page 2: span 1: toolguard.step must be >= 1" in stats.first_skipped
    assert stats.spans == len(spans) + 1  # every span read, the bad one left out on its own
    assert records == read_records([str(ORIGINAL)])[0]  # nothing of the page lost


def test_a_cursor_that_comes_back_is_an_error_not_a_loop(fake_phoenix: str) -> None:
    _Phoenix.repeat_cursor = True
    with pytest.raises(BackendError, match="next_cursor already followed"):
        read_phoenix(fake_phoenix, PROJECT, page_size=50)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (401, b'{"detail":"Invalid token"}',
         'HTTP 401 Unauthorized: {"detail":"Invalid token"} (Phoenix with authentication needs'),
        (500, b"Internal Server Error", "HTTP 500 Internal Server Error: Internal Server Error"),
        (503, b"", "HTTP 503 Service Unavailable"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_url_and_the_answer(
    fake_phoenix: str,
    capsys: pytest.CaptureFixture[str],
    status: int,
    body: bytes,
    expected: str,
) -> None:
    _Phoenix.refuse = (status, body, "application/json")
    code, out, err = _report(["--phoenix", fake_phoenix, "--project", PROJECT], capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith(f"toolguard: error: {spans_url(fake_phoenix, PROJECT)}?limit=1000: ")
    assert expected in err


def test_an_unknown_project_is_named(fake_phoenix: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _report(["--phoenix", fake_phoenix, "--project", "other"], capsys)
    assert code == 2
    assert "/prefix/v1/projects/other/spans/otlpv1?limit=1000: HTTP 404 Not Found" in err
    assert '"detail":"Project not found"' in err and "is the project name right" in err


def test_an_answer_that_is_not_a_span_export(
    fake_phoenix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _Phoenix.refuse = (200, b"<html>login</html>", "text/html")
    code, _, err = _report(["--phoenix", fake_phoenix, "--project", PROJECT], capsys)
    assert code == 2 and "the answer is not JSON" in err and "<html>login</html>" in err
    _Phoenix.refuse = (200, b'{"detail": "nope"}', "application/json")
    code, _, err = _report(["--phoenix", fake_phoenix, "--project", PROJECT], capsys)
    assert code == 2 and "a JSON object without a 'data' list" in err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the block ends: nothing listens there


def test_a_server_that_is_down(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    code, out, err = _report(["--phoenix", url, "--project", "p"], capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"{url}/v1/projects/p/spans/otlpv1?limit=1000: cannot connect (" in err
    assert "refused" in err.lower()


def test_a_server_that_never_answers() -> None:
    """Connected (the kernel's backlog accepts) but never answered: the timeout ends it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(BackendError, match=r"otlpv1\?limit=1000: no answer within 0.5 s"):
            read_phoenix(url, "p", timeout=0.5)


def test_the_command_line_as_a_user_runs_it() -> None:
    """A real process: exit status 2, one line on stderr, no traceback."""
    url = f"http://127.0.0.1:{_closed_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", "--phoenix", url, "--project", "p"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "cannot connect" in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--phoenix", "http://127.0.0.1:9"], "--phoenix needs --project NAME"),
        (["x.jsonl", "--phoenix", "http://h", "--project", "p"], "either span files or --phoenix"),
        (["x.jsonl", "--project", "p"], "--project and --api-key-env go with --phoenix URL"),
        ([], "no input: give span files, or --phoenix URL --project NAME"),
        (["--phoenix", "file:///etc/passwd", "--project", "p"], "not an http:// or https:// URL"),
        (["--phoenix", "http://h", "--project", "a/b"], "without '/', '?' or '#'"),
        (["--phoenix", "http://h", "--project", "p", "--api-key-env", "TG_UNSET_VAR_X"],
         "the environment variable TG_UNSET_VAR_X is not set"),
    ],
)  # fmt: skip
def test_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.delenv("TG_UNSET_VAR_X", raising=False)
    code, out, err = _report(argv, capsys)
    assert code == 2 and out == "" and message in err and "Traceback" not in err
