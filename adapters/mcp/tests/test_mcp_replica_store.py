"""Replicas sharing a trajectory store that stops answering (``--replica --store redis://``):
the store's round trips run in worker threads, so concurrent calls each wait for their own
round trip and what needs no store (``ping``) is answered at once; each call still fails
closed when the store does not answer, and once it answers again calls are checked against
the shared record. Against a fake store that accepts connections and never answers (held on
events, not timers) and a real ``redis-server`` on a free port (stopped with SIGSTOP)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import HERE, http_proxied
from test_mcp_proxy_fail_closed import call_spans
from test_mcp_server_middleware import text

pytestmark = pytest.mark.anyio

FAKE = [sys.executable, str(HERE / "fake_server.py")]
STORE_CHECK = "dependency.trajectory_store"
BOUND = 60.0  # a bound against a hung test, never a measurement
# Round trips that wait as long as the store holds them: the store, not a timer, decides.
HELD = "socket_timeout=600&socket_connect_timeout=600"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class HungStore:
    """A TCP server that accepts every connection, reads what it is sent and answers
    nothing until ``release()``; from then on it closes every connection, held or new (a
    store that went away)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.released = False
        self.lock = threading.Condition()
        self.asked = 0  # connections that sent a command and are waiting for its answer
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, options: str = HELD) -> str:
        return f"redis://127.0.0.1:{self.port}/0?{options}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:  # never a connection kept open after the release
                if self.released:
                    conn.close()
                    continue
                self.conns.append(conn)
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        try:
            if not conn.recv(65536):
                return
        except OSError:
            return
        with self.lock:
            self.asked += 1
            self.lock.notify_all()

    def wait_for(self, n: int) -> None:
        with self.lock:
            assert self.lock.wait_for(lambda: self.asked >= n, BOUND), self.asked

    def release(self) -> None:
        with self.lock:
            self.released = True
            for conn in self.conns:
                conn.close()
            self.conns.clear()

    def close(self) -> None:
        self.release()
        self.listener.close()


@pytest.fixture
def hung_store() -> Iterator[HungStore]:
    store = HungStore()
    try:
        yield store
    finally:
        store.close()


async def test_a_ping_is_answered_while_calls_wait_for_a_hung_store(
    tmp_path: Path, hung_store: HungStore
) -> None:
    """N calls of N trajectories wait for the store at once (each on a connection of its
    own); a ping is answered meanwhile. Released (the store gone), each call is blocked with
    the store's check, its answer naming the store."""
    from mcp import Client

    n = 4
    results: list[Any] = []
    options = ("--replica", "--store", hung_store.url())
    async with (
        http_proxied(tmp_path, FAKE, *options) as (url, run, _),
        Client(url, mode="legacy") as client,
    ):

        async def call(i: int) -> None:
            meta: Any = {"toolguard/trajectory_id": f"hung-{i}"}
            results.append(await client.call_tool("echo", {"text": str(i)}, meta=meta))

        try:
            async with anyio.create_task_group() as group:
                for i in range(n):
                    group.start_soon(call, i)
                await anyio.to_thread.run_sync(hung_store.wait_for, n)
                with anyio.fail_after(BOUND):
                    await client.send_ping()
                assert results == []  # every call is still waiting for the store
                hung_store.release()
        finally:
            hung_store.release()
    assert len(results) == n
    for result in results:
        assert result.is_error and "trajectory store is unavailable" in text(result)
    spans = call_spans(run.spans)
    assert len(spans) == n, run.stderr()
    for span in spans:
        assert (span["toolguard.decision"], span["toolguard.check"]) == ("blocked", STORE_CHECK)


# -- a real redis-server ------------------------------------------------------------------------
class Redis:
    """redis-server on a free loopback port, persisting nothing (tests/store/redis_server.py's
    pattern): ``pause()`` (SIGSTOP: holds connections, answers nothing), ``resume()``."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("no redis-server binary: apt-get install -y redis-server")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + BOUND  # a bound on start-up
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.02)

    def url(self, options: str = "") -> str:
        return f"redis://127.0.0.1:{self.port}/0" + (f"?{options}" if options else "")

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.proc.terminate()
        self.proc.wait(BOUND)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    server = Redis(tmp_path)
    try:
        yield server
    finally:
        server.stop()


async def test_a_replica_on_a_stopped_redis_answers_pings_and_recovers(
    tmp_path: Path, redis: Redis
) -> None:
    """A call waits for the stopped Redis (as long as it holds the round trip); a ping is
    answered meanwhile; once Redis goes on, the call is answered and the next one is checked
    against the same shared record (one trajectory, its steps counted)."""
    from mcp import Client

    options = ("--replica", "--store", redis.url(HELD))
    meta: Any = {"toolguard/trajectory_id": "paused"}
    done: list[Any] = []
    async with (
        http_proxied(tmp_path, FAKE, *options) as (url, run, _),
        Client(url, mode="legacy") as client,
    ):
        first = await client.call_tool("echo", {"text": "before"}, meta=meta)
        assert not first.is_error

        async def waiting() -> None:
            done.append(await client.call_tool("echo", {"text": "held"}, meta=meta))

        redis.pause()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(waiting)
                with anyio.fail_after(BOUND):
                    await client.send_ping()
                assert done == []  # Redis is stopped: the call cannot have been answered
                redis.resume()
        finally:
            redis.resume()
        assert text(done[0]) == "held"
        after = await client.call_tool("echo", {"text": "after"}, meta=meta)
        assert text(after) == "after"
    spans = call_spans(run.spans)
    assert [(s["toolguard.step"], s["toolguard.decision"]) for s in spans] == [
        ("1", "allowed"),
        ("2", "allowed"),
        ("3", "allowed"),
    ], run.stderr()


async def test_a_replica_on_a_stopped_redis_fails_closed_then_recovers(
    tmp_path: Path, redis: Redis
) -> None:
    """With the store's own timeout (0.5 s): a call while Redis is stopped is blocked with
    the store's check and not run; once Redis answers, calls run again, the blocked one
    counted in the same trajectory."""
    from mcp import Client

    meta: Any = {"toolguard/trajectory_id": "outage"}
    async with (
        http_proxied(tmp_path, FAKE, "--replica", "--store", redis.url()) as (url, run, _),
        Client(url, mode="legacy") as client,
    ):
        redis.pause()
        try:
            refused = await client.call_tool("echo", {"text": "during"}, meta=meta)
        finally:
            redis.resume()
        assert refused.is_error and "trajectory store is unavailable" in text(refused)
        again = await client.call_tool("echo", {"text": "after"}, meta=meta)
        assert text(again) == "after"
    spans = call_spans(run.spans)
    assert [(s["toolguard.decision"], s.get("toolguard.check")) for s in spans] == [
        ("blocked", STORE_CHECK),
        ("allowed", None),
    ], run.stderr()
    assert [s["toolguard.step"] for s in spans] == ["1", "2"]
