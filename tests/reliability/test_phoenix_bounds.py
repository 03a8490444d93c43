"""The Phoenix pull ends, whatever the server does: a cursor chain that never ends (new spans,
the same spans or none under ever new cursors) and an answer that drips in and never finishes
are each stopped with one line. A real HTTP server on 127.0.0.1 plays the server; a held
answer waits on an event the test sets at the end, never on a sleep, and no assertion is on
elapsed time."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from toolguard import _cli as cli
from toolguard._cli import main
from toolguard.report.phoenix import DEFAULT_DEADLINE_S, DEFAULT_MAX_PAGES, iter_phoenix_pages
from toolguard.report.reader import BackendError, ReadStats

# The server ends its chain after this many pages, so that code without the bounds finishes
# (and its test fails) instead of looping for ever.
CHAIN_END = 200


def _span(n: int) -> dict[str, Any]:
    return {"trace_id": "ab" * 16, "span_id": f"{n:016x}", "name": "s", "attributes": []}


class _Server(BaseHTTPRequestHandler):
    mode: ClassVar[str] = "endless"
    release: ClassVar[threading.Event] = threading.Event()
    served: ClassVar[int] = 0

    def do_GET(self) -> None:
        cls = type(self)
        cls.served += 1
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        page = int(query.get("cursor", ["0"])[0])
        if self.mode == "drip_body":
            return self._drip(head=True)
        if self.mode == "drip_status":
            return self._drip(head=False)
        if self.mode == "silent_second" and page > 0:
            cls.release.wait()  # nothing at all is answered to the second request
            return None
        data = {
            "endless": [_span(page)],
            "repeat": [_span(1), _span(2)],
            "empty": [],
            "silent_second": [_span(page)],
        }[self.mode]
        cursor = str(page + 1) if page + 1 < CHAIN_END else None
        body = json.dumps({"data": data, "next_cursor": cursor}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _drip(self, *, head: bool) -> None:
        """A byte of the answer, then nothing until the test ends: no read times out (each
        gets its byte in time), only the whole pull's deadline can end it."""
        if head:
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"{")
        else:
            self.wfile.write(b"H")
        self.wfile.flush()
        type(self).release.wait()

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def server() -> Iterator[str]:
    _Server.mode, _Server.served, _Server.release = "endless", 0, threading.Event()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        _Server.release.set()  # the held answers end
        httpd.shutdown()
        httpd.server_close()


def _pull(url: str, **bounds: Any) -> int:
    return sum(1 for _ in iter_phoenix_pages(url, "p", ReadStats(), **bounds))


def test_an_endless_chain_of_new_pages_stops_at_the_page_bound(server: str) -> None:
    with pytest.raises(BackendError) as caught:
        _pull(server, max_pages=5)
    message = str(caught.value)
    assert "still a next_cursor after 5 pages, the most one pull follows (max_pages)" in message
    assert message.startswith(f"{server}/v1/projects/p/spans/otlpv1?limit=1000&cursor=5: ")
    assert _Server.served == 5  # the sixth page is never asked for


def test_the_same_page_under_new_cursors_is_an_error_not_a_loop(server: str) -> None:
    _Server.mode = "repeat"
    with pytest.raises(BackendError, match=r"cursor=1: page 2 repeats page 1 \(the same 2 spans\)"):
        _pull(server)
    assert _Server.served == 2


def test_empty_pages_under_new_cursors_end_the_pull(server: str) -> None:
    _Server.mode = "empty"
    with pytest.raises(BackendError, match=r"page 2 repeats page 1 \(no span\) under a new"):
        _pull(server)


def test_the_command_line_says_it_in_one_line(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _Server.mode = "repeat"
    code = main(["report", "--phoenix", server, "--project", "p"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and "repeats page 1" in err and "endless cursor chain" in err


@pytest.mark.parametrize("mode", ["drip_body", "drip_status"])
def test_an_answer_that_never_finishes_ends_at_the_deadline(server: str, mode: str) -> None:
    _Server.mode = mode
    with pytest.raises(BackendError) as caught:
        _pull(server, deadline=0.5)  # the per-read timeout stays at its 60 s
    assert str(caught.value) == (
        f"{server}/v1/projects/p/spans/otlpv1?limit=1000: the pull did not end within its "
        "deadline of 0.5 s (page 1): a server that answers too slowly, or never finishes an "
        "answer"
    )


def test_the_deadline_bounds_the_whole_pull_not_one_read(server: str) -> None:
    _Server.mode = "silent_second"
    with pytest.raises(BackendError, match=r"cursor=1: the pull did not end within its deadline"):
        _pull(server, deadline=0.5)
    assert _Server.served == 2


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="max_pages and deadline must be positive"):
        _pull("http://127.0.0.1:9", max_pages=0)
    with pytest.raises(ValueError, match="max_pages and deadline must be positive"):
        _pull("http://127.0.0.1:9", deadline=0)


def test_a_deadline_no_timer_can_wait_for_is_refused() -> None:
    # Such a timer fails in its own thread and never goes off: the pull would be unbounded.
    with pytest.raises(ValueError, match="max_pages and deadline must be positive"):
        _pull("http://127.0.0.1:9", deadline=1e300)


# -- the command line passes the bounds through -----------------------------------------------


def _report(*words: str) -> list[str]:
    return ["report", *words]


def test_the_command_line_s_page_bound_stops_an_endless_chain(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(_report("--phoenix", server, "--project", "p", "--phoenix-max-pages", "3"))
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (
        f"toolguard: error: {server}/v1/projects/p/spans/otlpv1?limit=1000&cursor=3: still a "
        "next_cursor after 3 pages, the most one pull follows (max_pages): an endless cursor "
        "chain?\n"
    )
    assert _Server.served == 3


def test_the_command_line_s_deadline_ends_an_answer_that_never_finishes(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _Server.mode = "drip_body"
    code = main(_report("--phoenix", server, "--project", "p", "--phoenix-deadline", "0.5"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("toolguard: error: ") and "deadline of 0.5 s (page 1)" in err


def test_the_command_line_passes_the_library_s_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def read_phoenix(*args: Any, **options: Any) -> Any:
        seen.update(options)
        raise BackendError("stop here")

    monkeypatch.setattr(cli, "read_phoenix", read_phoenix)
    assert main(_report("--phoenix", "http://127.0.0.1:9", "--project", "p")) == 2
    assert (seen["max_pages"], seen["deadline"]) == (DEFAULT_MAX_PAGES, DEFAULT_DEADLINE_S)


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--phoenix-max-pages", "0", "a whole number of pages >= 1"),
        ("--phoenix-max-pages", "-2", "a whole number of pages >= 1"),
        ("--phoenix-max-pages", "2.5", "a whole number of pages >= 1"),
        ("--phoenix-max-pages", "many", "a whole number of pages >= 1"),
        ("--phoenix-deadline", "0", "a number of seconds > 0"),
        ("--phoenix-deadline", "-1", "a number of seconds > 0"),
        ("--phoenix-deadline", "nan", "a number of seconds > 0"),
        ("--phoenix-deadline", "inf", "a number of seconds > 0"),
        ("--phoenix-deadline", "1e300", "a number of seconds > 0"),  # no timer waits that long
        ("--phoenix-deadline", "soon", "a number of seconds > 0"),
    ],
)
def test_the_command_line_s_bounds_are_checked_in_one_line(
    server: str, capsys: pytest.CaptureFixture[str], flag: str, value: str, expected: str
) -> None:
    code = main(_report("--phoenix", server, "--project", "p", f"{flag}={value}"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"toolguard: error: {flag}: expected {expected}")
    assert err.rstrip().endswith(f"got {value!r}")
    assert _Server.served == 0  # checked before anything is asked


def test_the_command_line_s_bounds_go_with_phoenix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_report("spans.jsonl", "--phoenix-max-pages", "3")) == 2
    assert capsys.readouterr().err == (
        "toolguard: error: --phoenix-max-pages and --phoenix-deadline go with --phoenix URL\n"
    )
