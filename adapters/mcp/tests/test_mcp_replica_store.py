"""Replicas sharing a trajectory store that stops answering (``--replica --store redis://``):
the store's round trips run in worker threads, so concurrent calls each wait for their own
round trip and what needs no store (``ping``) is answered at once; each call still fails
closed when the store does not answer, and once it answers again calls are checked against
the shared record. Against a fake store that accepts connections and never answers (held on
events, not timers) and a real ``redis-server`` on a free port (stopped with SIGSTOP)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from stores import BOUND, HELD, HungStore, Redis

from conftest import HERE, http_proxied
from test_mcp_proxy_fail_closed import call_spans
from test_mcp_server_middleware import text

pytestmark = pytest.mark.anyio

FAKE = [sys.executable, str(HERE / "fake_server.py")]
STORE_CHECK = "dependency.trajectory_store"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
