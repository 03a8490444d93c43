"""MCP proxies sharing one Redis store (``toolguard mcp-proxy --store redis://...``):

- two proxies for two different servers (mcp-server-time and a small echo server) in one
  episode: one summary with the episode's T and FED, where each proxy alone wrote its own
  (and the report's figures were wrong);
- a proxy killed mid-episode: the next proxy continues the trajectory's steps and writes
  its summary.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import toolguard as tg
from toolguard import _contract as contract

pytest.importorskip("toolguard_mcp", reason="the MCP adapter (adapters/mcp) is not installed")
pytest.importorskip("mcp_server_time", reason="mcp-server-time is in the MCP adapter's [test]")

pytestmark = pytest.mark.anyio

PROXY = Path(sys.executable).parent / "toolguard-mcp-proxy"
TIME = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
ECHO = [sys.executable, str(Path(__file__).with_name("echo_server.py"))]
META_ID = "toolguard/trajectory_id"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextmanager
def http_proxy(spans: Path, server: list[str], *options: str) -> Iterator[tuple[str, Any]]:
    """``toolguard-mcp-proxy --http 127.0.0.1:0 --spans FILE [options] -- server``: its URL
    (from the line it logs once listening) and its process; SIGTERM at the end."""
    proc = subprocess.Popen(
        [str(PROXY), "--http", "127.0.0.1:0", "--spans", str(spans), *options, "--", *server],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stderr is not None
        seen = ""
        for line in proc.stderr:  # ends when the proxy exits: no wait without a bound
            seen += line
            found = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp)", line)
            if found:
                break
        assert found, seen
        yield found.group(1), proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(60)


async def call(url: str, name: str, arguments: dict[str, Any], episode: str) -> Any:
    from mcp import Client

    async with Client(url, mode="legacy") as client:
        return await client.call_tool(name, arguments, meta={META_ID: episode})


def spans_in(*paths: Path) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        for line in path.read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        attrs = {
                            a["key"]: next(iter(a["value"].values())) for a in span["attributes"]
                        }
                        out.append({"name": span["name"], **attrs})
    return out


def report(*paths: Path) -> dict[str, Any]:
    records, _ = tg.read_records([str(p) for p in paths])
    return dict(tg.build_report(records)["overall"])


@pytest.mark.parametrize("shared", [True, False], ids=["store", "no-store"])
async def test_two_proxies_for_two_servers_in_one_episode(
    redis_url: str, tmp_path: Path, shared: bool
) -> None:
    store = ["--store", redis_url] if shared else []
    time_spans, echo_spans = tmp_path / "time.jsonl", tmp_path / "echo.jsonl"
    with (
        http_proxy(time_spans, TIME, *store) as (time_url, _),
        http_proxy(echo_spans, ECHO, *store) as (echo_url, _),
    ):
        ok = await call(time_url, "get_current_time", {"timezone": "UTC"}, "ep-1")
        assert not ok.is_error
        assert not (await call(echo_url, "echo", {"text": "hi"}, "ep-1")).is_error
        bad = await call(time_url, "get_current_time", {"zone": "UTC"}, "ep-1")
        assert bad.is_error and "rejected (schema)" in bad.content[0].text
        assert not (await call(echo_url, "echo", {"text": "bye"}, "ep-1")).is_error
    spans = spans_in(time_spans, echo_spans)
    summaries = [s for s in spans if s["name"] == contract.SUMMARY_SPAN_NAME]
    figures = report(time_spans, echo_spans)
    if not shared:  # each proxy alone: two summaries of one id, and figures the report guesses
        assert len(summaries) == 2
        return
    assert len(summaries) == 1
    assert int(summaries[0][contract.TRAJECTORY_LENGTH]) == 4
    assert int(summaries[0][contract.TRAJECTORY_FED]) == 3
    steps = sorted(int(s[contract.STEP]) for s in spans if contract.STEP in s)
    assert steps == [1, 2, 3, 4]
    assert (figures["n"], figures["ter"], figures["mean_fed"]) == (1, 0.0, 3.0)
    assert figures["causes"]["schema"] == 1
    assert figures["disagreements"] == 0 and figures["incomplete"] == 0


async def test_a_killed_proxy_is_continued_by_the_next(redis_url: str, tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    with http_proxy(first, ECHO, "--store", redis_url) as (url, proc):
        for text in ("one", "two"):
            assert not (await call(url, "echo", {"text": text}, "ep-k")).is_error
        bad = await call(url, "echo", {"txt": "typo"}, "ep-k")  # step 3, blocked
        assert bad.is_error
        proc.send_signal(signal.SIGKILL)  # no summary, no goodbye
        proc.wait(60)
    with http_proxy(second, ECHO, "--store", redis_url) as (url, _):
        for text in ("four", "five"):
            assert not (await call(url, "echo", {"text": text}, "ep-k")).is_error
    spans = spans_in(second) + (spans_in(first) if first.exists() else [])
    summaries = [s for s in spans if s["name"] == contract.SUMMARY_SPAN_NAME]
    assert len(summaries) == 1
    # The second proxy took steps 4 and 5: the killed one's record was in the store.
    assert sorted(int(s[contract.STEP]) for s in spans_in(second) if contract.STEP in s) == [4, 5]
    assert int(summaries[0][contract.TRAJECTORY_LENGTH]) == 5
    assert int(summaries[0][contract.TRAJECTORY_FED]) == 3


def test_a_bad_store_url_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(PROXY), "--store", "mem://x", "--no-spans", "--", *ECHO],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "--store: 'mem://x' is no trajectory store" in proc.stderr


class Balancer:
    """An HTTP/1.1 balancer on loopback, as a deployment runs one: a request that starts a
    session (no ``Mcp-Session-Id``) goes to the next replica in turn; a request of a session
    goes to the replica that opened it (the session lives there). Each request gets its own
    upstream connection (``Connection: close``), so a response ends where the upstream does."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends = backends
        self.turn = 0
        self.sessions: dict[str, int] = {}
        self.opened: list[int] = []  # the replica each new session went to

    async def serve(self) -> Any:
        import asyncio

        return await asyncio.start_server(self._client, "127.0.0.1", 0)

    async def _client(self, reader: Any, writer: Any) -> None:
        import asyncio

        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (ln.partition(":") for ln in lines[1:] if ln)}  # fmt: skip
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                session = headers.get("mcp-session-id")
                if session is not None and session in self.sessions:
                    index = self.sessions[session]
                else:
                    index = self.turn % len(self.backends)
                    self.turn += 1
                    self.opened.append(index)
                kept = [ln for ln in lines[1:] if ln and not ln.lower().startswith("connection:")]
                request = "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode()
                up_reader, up_writer = await asyncio.open_connection(*self.backends[index])
                up_writer.write(request + body)
                await up_writer.drain()
                answer = await up_reader.readuntil(b"\r\n\r\n")
                for line in answer.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "mcp-session-id":
                        self.sessions[value.strip()] = index
                writer.write(answer)
                while data := await up_reader.read(65536):
                    writer.write(data)
                    await writer.drain()
                up_writer.close()
        except (ConnectionError, OSError):
            return
        finally:
            writer.close()


async def test_three_replicas_behind_a_balancer(redis_url: str, tmp_path: Path) -> None:
    from contextlib import ExitStack
    from urllib.parse import urlsplit

    files = [tmp_path / f"replica{i}.jsonl" for i in range(3)]
    with ExitStack() as stack:
        urls = [stack.enter_context(http_proxy(f, ECHO, "--store", redis_url))[0] for f in files]
        balancer = Balancer([(urlsplit(u).hostname or "", urlsplit(u).port or 0) for u in urls])
        server = await balancer.serve()
        front = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
        try:
            for text in ("a", "b", "c"):  # each call its own host session, hence replica
                assert not (await call(front, "echo", {"text": text}, "ep-rr")).is_error
            bad = await call(front, "echo", {"txt": "typo"}, "ep-rr")
            assert bad.is_error and "rejected (schema)" in bad.content[0].text
            for text in ("e", "f", "g"):
                assert not (await call(front, "echo", {"text": text}, "ep-rr")).is_error
        finally:
            server.close()
    assert sorted(set(balancer.opened)) == [0, 1, 2]
    spans = spans_in(*files)
    steps = sorted(int(s[contract.STEP]) for s in spans if contract.STEP in s)
    assert steps == list(range(1, 8))
    assert all(any(contract.STEP in s for s in spans_in(f)) for f in files)  # all three served
    summaries = [s for s in spans if s["name"] == contract.SUMMARY_SPAN_NAME]
    assert len(summaries) == 1
    summary = summaries[0]
    assert int(summary[contract.TRAJECTORY_LENGTH]) == 7
    assert int(summary[contract.TRAJECTORY_FED]) == 4
    figures = report(*files)
    assert (figures["n"], figures["mean_fed"], figures["disagreements"]) == (1, 4.0, 0)
