"""The relay's guard work in worker threads, for a guard whose trajectories live in a shared
store (:mod:`toolguard_mcp.offload` says why): a call's check, its closing, a refusal's
record. The relay goes on with the messages after it meanwhile.

Kept in order where order is the contract's: a call's answer goes to the host once the call
is closed (what it produced is bound), so a call the host sends after reading the answer is
checked against it, as when the relay closes a call in the callback that read its answer.
A call the host cancels while its check runs is not forwarded; a check that ends after the
relay stopped cancels its call (every call gets its verdict).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import toolguard as tg

if TYPE_CHECKING:
    from .relay_base import RelayBase, _Inflight
    from .relay_host import HostSide

logger = logging.getLogger("toolguard.mcp")

# The tasks running here, kept from the garbage collector until they are done.
_tasks: set[asyncio.Task[None]] = set()


def admit(relay: HostSide, rid: Any, params: dict[str, Any], msg: dict[str, Any]) -> None:
    """Check a ``tools/call`` in a thread, then forward it or answer its refusal."""
    # What the relay holds for this message now (a replica sets them per message).
    session, client = relay.session, relay.client
    relay.checking[rid] = False
    _start(_admit(relay, rid, params, msg, session, client))


async def _admit(
    relay: HostSide,
    rid: Any,
    params: dict[str, Any],
    msg: dict[str, Any],
    session: str | None,
    client: str | None,
) -> None:
    future = relay.calls.offload.submit(relay._check, params, session, client)
    try:
        pending = await asyncio.shield(future)
    except asyncio.CancelledError:
        future.add_done_callback(lambda done: _abandon(relay, done))
        raise
    except Exception:
        logger.exception("toolguard-mcp-proxy: checking a call failed")
        pending = None
    finally:
        cancelled = relay.checking.pop(rid, False)
    if pending is None:  # fail closed: not forwarded
        relay._answer(rid, _internal_error(rid))
        return
    if (cancelled or relay.stopped) and isinstance(pending, tg.PendingCall):
        if pending.rejection is None:
            later(relay, pending.cancel)  # never forwarded: the host gave up, or the relay
        return
    relay._admitted(rid, params, msg, pending, session)


def _abandon(relay: RelayBase, done: asyncio.Future[Any]) -> None:
    """A check whose task was cancelled (the proxy stopping): its call is cancelled."""
    if done.cancelled() or done.exception() is not None:
        return
    pending = done.result()
    if isinstance(pending, tg.PendingCall) and pending.rejection is None:
        relay.calls.offload.submit(safely, pending.cancel)


def answer(relay: RelayBase, rid: Any, msg: dict[str, Any], raw: bytes | None) -> None:
    """The server's answer to an admitted call: the call closed in a thread, then the answer
    sent to the host, then the rest of its bookkeeping."""
    entry = relay.inflight.pop(rid)
    _start(_answer(relay, rid, msg, raw, entry))


async def _answer(
    relay: RelayBase, rid: Any, msg: dict[str, Any], raw: bytes | None, entry: _Inflight
) -> None:
    try:
        await relay.calls.offload.submit(safely, relay._close_call, entry, msg)
    finally:
        # Sent even when the proxy is stopping (the thread closes the call all the same).
        safely(relay._answer, rid, msg, raw)
        safely(relay._after_answer, msg)  # progress tokens; the call is no longer in flight


def later(relay: RelayBase, fn: Any, *args: Any) -> None:
    """``fn(*args)`` in a thread, not waited for; a failure is logged."""
    relay.calls.offload.submit(safely, fn, *args)


def _start(work: Any) -> None:
    task = asyncio.ensure_future(work)
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def safely(fn: Any, *args: Any, **kwargs: Any) -> None:
    """Bookkeeping after the host has its answer must never stop the relay."""
    try:
        fn(*args, **kwargs)
    except Exception:
        logger.exception("toolguard-mcp-proxy: recording a call failed")


def _internal_error(rid: Any) -> dict[str, Any]:
    message = "toolguard-mcp-proxy could not check the call; it was not forwarded"
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": message}}
