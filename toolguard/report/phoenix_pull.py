"""The live pull of a Phoenix span export: its pages over HTTP, and the bounds that make the
pull end whatever the server does.

Phoenix answers ``GET /v1/projects/{project}/spans/otlpv1?limit=N[&cursor=C]`` with one page,
``{"data": [span, ...], "next_cursor": "..." | null}`` (the page format: ``phoenix``). The
pull follows the cursors and stops with a BackendError naming the URL when the server is
down, refuses, times out or answers something that is not a page; and when the pull does not
end: more than ``max_pages`` pages, a page that repeats an earlier one under a new cursor, or
``deadline`` seconds in all, which also ends an answer that drips in and never finishes. The
standard library (urllib) only.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.client
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from .escape import printable, short
from .reader import DEFAULT_MAX_LINE_BYTES, BackendError, ReadStats, _loads

DEFAULT_PAGE_SIZE = 1000
"""Spans asked for per page: Phoenix's maximum (it refuses more with HTTP 422)."""
DEFAULT_TIMEOUT_S = 60.0
"""The longest one read from the socket may wait (connecting, or any part of an answer)."""
DEFAULT_MAX_PAGES = 10_000
"""Pages one pull follows at the most: 10 million spans at 1,000 a page. A server whose
cursors never end (new cursors on pages of new spans) is stopped here."""
DEFAULT_DEADLINE_S = 3600.0
"""The whole pull's bound, in seconds. The per-read timeout does not bound an answer that
drips in a byte at a time, nor a long chain of slow pages; this does."""
MAX_DEADLINE_S = threading.TIMEOUT_MAX
"""The longest deadline: the deadline is a timer, and one longer than the platform can wait
fails in its own thread and never goes off, which would leave the pull unbounded."""
_BODY_QUOTED = 300  # characters of an error answer quoted in the message


def _describe(obj: Any) -> str:
    """What an answer or a saved line is when it is not a page: here, where the pull checks
    its answers, since ``phoenix`` (which checks saved pages) imports this module."""
    if isinstance(obj, dict):
        if "resourceSpans" in obj:
            return "an OTLP trace export, not a Phoenix span export (drop --input-format phoenix)"
        keys = ", ".join(sorted(map(str, obj))[:5]) or "no keys"
        return f"a JSON object without a 'data' list ({short(keys)}), not a Phoenix span export"
    return f"a JSON {type(obj).__name__}, not a Phoenix span export page"


def spans_url(base_url: str, project: str) -> str:
    """The span export endpoint of ``project`` on the Phoenix at ``base_url``.

    Raises BackendError for a URL that is not http(s) or a project name Phoenix cannot
    address by name (it may not contain ``/``, ``?`` or ``#``)."""
    parts = urllib.parse.urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BackendError(
            f"{printable(base_url)!r} is not an http:// or https:// URL of a Phoenix server "
            "(e.g. http://localhost:6006)"
        )
    if not project or any(c in project for c in "/?#"):
        raise BackendError(
            f"project {printable(project)!r}: Phoenix addresses projects by a non-empty name "
            "without '/', '?' or '#'"
        )
    path = parts.path.rstrip("/") + f"/v1/projects/{urllib.parse.quote(project, safe='')}"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path + "/spans/otlpv1", "", ""))


def iter_phoenix_pages(
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
) -> Iterator[tuple[Any, str]]:
    """Yield ``(page, "URL page N")``: every page of ``project``'s span export, parsed JSON.

    ``api_key`` goes in an ``Authorization: Bearer`` header (Phoenix with auth enabled).
    Raises BackendError naming the URL and what it answered when the server is down, refuses
    (HTTP 4xx/5xx), times out, or answers something that is not a page of spans; and when the
    pull does not end: more than ``max_pages`` pages, a page that repeats an earlier one (the
    same spans, or none, under a new cursor), or ``deadline`` seconds passed in all."""
    if not 1 <= page_size <= DEFAULT_PAGE_SIZE:
        raise ValueError(f"page_size must be in 1..{DEFAULT_PAGE_SIZE}, got {page_size}")
    if max_pages < 1 or not 0 < deadline <= MAX_DEADLINE_S:
        raise ValueError(
            f"max_pages and deadline must be positive (deadline at most {MAX_DEADLINE_S:g} s), "
            f"got {max_pages}, {deadline}"
        )
    clock = _Deadline(deadline)
    opener = _opener(clock)
    url = spans_url(base_url, project)
    stats.files.append(url)
    headers = {"Accept": "application/json", "User-Agent": "toolguard-report"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    cursor: str | None = None
    seen: set[str] = set()
    pages: dict[bytes, int] = {}  # each page's spans (their ids) -> the first page holding them
    number = 0
    while True:
        query = {"limit": str(page_size)} | ({"cursor": cursor} if cursor else {})
        page_url = f"{url}?{urllib.parse.urlencode(query)}"
        if number == max_pages:
            raise BackendError(
                f"{page_url}: still a next_cursor after {max_pages:,} pages, the most one pull "
                "follows (max_pages): an endless cursor chain?"
            )
        number += 1
        body = _get(opener, page_url, headers, timeout, max_page_bytes, clock, number)
        where = f"{url} page {number}"
        try:
            page = _loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BackendError(
                f"{page_url}: the answer is not JSON ({exc}): {_quote(body)}"
            ) from None
        if not isinstance(page, dict) or not isinstance(page.get("data"), list):
            raise BackendError(f"{page_url}: {_describe(page)}: {_quote(body)}")
        stats.lines += 1
        yield page, where
        cursor = page.get("next_cursor")
        if cursor is None:
            return
        if not isinstance(cursor, str) or cursor in seen:
            raise BackendError(f"{page_url}: a next_cursor already followed or not a string")
        seen.add(cursor)
        first = pages.setdefault(_fingerprint(page["data"]), number)
        if first != number:
            what = f"the same {len(page['data'])} spans" if page["data"] else "no span"
            raise BackendError(
                f"{page_url}: page {number} repeats page {first} ({what}) under a new "
                "next_cursor: an endless cursor chain"
            )


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to another http(s) URL (urllib would also follow one to ftp)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            raise BackendError(f"{req.full_url}: redirected to a URL that is not http(s)")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _fingerprint(spans: list[Any]) -> bytes:
    """A page's spans by their ids: a page that repeats an earlier one brings nothing new (the
    reader keeps one span per trace and span id), so its cursor leads nowhere."""
    digest = hashlib.blake2b(digest_size=16)
    for s in spans:
        ident = (s.get("trace_id"), s.get("span_id")) if isinstance(s, dict) else s
        digest.update(repr(ident).encode("utf-8", "replace") + b"\0")
    return digest.digest()


class _Deadline:
    """The pull's overall bound. A socket timeout bounds each read, not an answer that drips
    in a byte at a time: so the socket being read is shut down when the time is up, which
    ends a read blocked in it at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ends = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self.expired = False

    def left(self) -> float:
        return self._ends - time.monotonic()

    def watch(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._socket = sock
            if self.expired:
                self._cut()

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            self._cut()

    def _cut(self) -> None:
        if self._socket is not None:
            # The plain socket's shutdown also for TLS: SSLSocket's own drops its state,
            # which the thread blocked in a read still uses. A socket closed already raises
            # OSError: the read it would end is over.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self._socket, socket.SHUT_RDWR)

    def error(self, url: str, number: int) -> BackendError:
        return BackendError(
            f"{url}: the pull did not end within its deadline of {self.seconds:g} s (page "
            f"{number}): a server that answers too slowly, or never finishes an answer"
        )


class _WatchedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, *, clock: _Deadline, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._clock = clock

    def connect(self) -> None:
        super().connect()  # in _WatchedHTTPS, HTTPSConnection's: the socket is TLS by now
        self._clock.watch(self.sock)


class _WatchedHTTPS(_WatchedHTTP, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, clock: _Deadline) -> None:
        super().__init__()
        self._clock = clock

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_WatchedHTTP, clock=self._clock), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, clock: _Deadline) -> None:
        super().__init__()
        self._clock = clock

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_WatchedHTTPS, clock=self._clock), req)


def _opener(clock: _Deadline) -> urllib.request.OpenerDirector:
    # The URL is checked by spans_url (http or https only), redirects by _HttpOnlyRedirects;
    # the connections are watched by ``clock``.
    return urllib.request.build_opener(
        _HttpOnlyRedirects, _HTTPHandler(clock), _HTTPSHandler(clock)
    )


def _get(
    opener: urllib.request.OpenerDirector,
    url: str,
    headers: dict[str, str],
    timeout: float,
    max_bytes: int,
    clock: _Deadline,
    number: int,
) -> bytes:
    left = clock.left()
    if left <= 0:
        raise clock.error(url, number)
    per_read = min(timeout, left)
    alarm = threading.Timer(left, clock.expire)
    alarm.daemon = True
    alarm.start()
    try:
        body = _read(opener, url, headers, per_read, max_bytes)
    except _TimedOut:
        if per_read < timeout or clock.expired:
            raise clock.error(url, number) from None
        raise BackendError(f"{url}: no answer within {timeout:g} s") from None
    except BackendError:
        if clock.expired:  # the failure is the cut socket's
            raise clock.error(url, number) from None
        raise
    finally:
        alarm.cancel()
        clock.watch(None)
    if clock.expired:  # a cut answer may look whole: its end never came
        raise clock.error(url, number)
    if len(body) > max_bytes:
        raise BackendError(
            f"{url}: the answer is larger than {max_bytes:,} bytes (raise --max-line-bytes)"
        )
    return body


class _TimedOut(Exception):
    """A read waited its whole timeout."""


def _read(
    opener: urllib.request.OpenerDirector,
    url: str,
    headers: dict[str, str],
    timeout: float,
    max_bytes: int,
) -> bytes:
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with opener.open(request, timeout=timeout) as answer:
            body: bytes = answer.read(max_bytes + 1)
    except urllib.error.HTTPError as exc:
        detail = _quote(_read_quietly(exc))
        raise BackendError(
            f"{url}: HTTP {exc.code} {exc.reason}{': ' + detail if detail else ''}"
            + _hint(exc.code)
        ) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError | socket.timeout):
            raise _TimedOut from None
        raise BackendError(f"{url}: cannot connect ({reason})") from None
    except TimeoutError:
        raise _TimedOut from None
    except (OSError, http.client.HTTPException) as exc:  # reset or cut half way through
        raise BackendError(f"{url}: the connection failed ({exc})") from None
    return body


def _read_quietly(exc: urllib.error.HTTPError) -> bytes:
    try:
        return exc.read(64 * 1024)
    except OSError:
        return b""


def _quote(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    if len(text) > _BODY_QUOTED:
        text = text[:_BODY_QUOTED] + "..."
    return printable(text)


def _hint(status: int) -> str:
    if status in (401, 403):
        return " (Phoenix with authentication needs an API key: --api-key-env VAR)"
    if status == 404:
        return " (is the project name right, and is this a Phoenix server?)"
    return ""
