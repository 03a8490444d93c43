"""``GuardedClient`` and ``guard_server`` with a shared store that accepts connections and
never answers: the store's round trips run in worker threads, not on the app's event loop,
so the app's other work goes on while a call waits (the proxy's case is in
test_mcp_replica_store.py). The store holds each round trip until it is released (an event,
not a timer); released (the store gone), the call fails closed, as before."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from stores import BOUND, HungStore, Redis
from test_mcp_replica_store import STORE_CHECK

import toolguard_mcp as tgmcp

from test_mcp_server_middleware import CONTRACT, PHONE, contacts_server, text

pytestmark = pytest.mark.anyio

# Round trips wait as long as the store holds them; the timeout only bounds a broken run
# (a check on the event loop would hold the loop, and this test's own wait, until then).
HELD = f"socket_timeout={int(BOUND)}&socket_connect_timeout={int(BOUND)}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _while_held(store: HungStore, call: Any) -> list[Any]:
    """Run ``call()`` while the store holds its round trip: the loop must stay free to see
    the store asked and to answer a question of its own meanwhile."""
    results: list[Any] = []
    ticks: list[int] = []

    async def run() -> None:
        results.append(await call())

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await anyio.to_thread.run_sync(store.wait_for, 1)
            await anyio.sleep(0)
            ticks.append(1)  # the loop ran this while the call waited
            assert results == []
            store.release()
    finally:
        store.release()
    assert ticks == [1]
    return results


async def test_a_guarded_client_waits_for_the_store_off_the_event_loop(
    hung_store: HungStore, otel: Any
) -> None:
    from mcp import Client

    guard = otel.guard(store=hung_store.url(HELD))
    async with Client(contacts_server()) as raw:
        client = tgmcp.GuardedClient(raw, guard, CONTRACT, trajectory=None)
        await client.declare_tools()
        with anyio.fail_after(BOUND):
            (result,) = await _while_held(
                hung_store, lambda: client.call_tool("search_contacts", {"phone": PHONE})
            )
    assert result.is_error and "trajectory store is unavailable" in text(result)
    (span,) = otel.call_spans()
    assert (span.attributes["toolguard.decision"], span.attributes["toolguard.check"]) == (
        "blocked",
        STORE_CHECK,
    )


async def test_a_guarded_server_waits_for_the_store_off_the_event_loop(
    hung_store: HungStore, otel: Any
) -> None:
    from mcp import Client

    server = contacts_server()
    middleware = tgmcp.guard_server(server, otel.guard(store=hung_store.url(HELD)), CONTRACT)
    async with Client(server) as client:
        with anyio.fail_after(BOUND):
            (result,) = await _while_held(
                hung_store, lambda: client.call_tool("search_contacts", {"phone": PHONE})
            )
    middleware.calls.close()
    assert result.is_error and "trajectory store is unavailable" in text(result)
    (span,) = otel.call_spans()
    assert (span.attributes["toolguard.decision"], span.attributes["toolguard.check"]) == (
        "blocked",
        STORE_CHECK,
    )


async def test_a_call_cancelled_while_its_check_waits_still_gets_its_verdict(
    redis: Redis, otel: Any
) -> None:
    # A real redis-server, stopped (SIGSTOP) once the trajectory is open: the call's check
    # waits for it in a thread; the host gives up meanwhile; the store resumed, the check
    # ends and the call, never sent, is closed as cancelled (not left without a verdict).
    from mcp import Client

    guard = otel.guard(store=redis.url(HELD))
    results: list[Any] = []
    async with Client(contacts_server()) as raw:
        client = tgmcp.GuardedClient(raw, guard, CONTRACT)
        await client.declare_tools()
        traj = client.trajectory  # opened while the store answers
        redis.pause()
        try:
            with anyio.fail_after(BOUND):
                async with anyio.create_task_group() as group:

                    async def run() -> None:
                        call = client.call_tool("search_contacts", {"phone": PHONE})
                        results.append(await call)

                    group.start_soon(run)
                    while not _checking(client):  # the check's thread has started
                        await anyio.sleep(0.01)
                    group.cancel_scope.cancel()  # the host gives up while the store is asked
                    redis.resume()
        finally:
            redis.resume()
        client.end()
    assert results == []  # the caller was cancelled: no answer handed back
    (span,) = otel.call_spans()  # and the call was closed
    assert span.attributes["toolguard.decision"] == "cancelled"
    assert traj.length == 1


def _checking(client: Any) -> bool:
    limiter = client.calls.offload._limiter
    return limiter is not None and limiter.borrowed_tokens > 0
