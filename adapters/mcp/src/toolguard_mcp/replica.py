"""The proxy over streamable HTTP as one replica of several behind a load balancer
(``toolguard mcp-proxy --http HOST:PORT --replica --store redis://...``).

A replica keeps no HTTP session of its own, so a balancer may send any request to any
replica (round robin per TCP connection, no affinity):

- one server process per replica, started and initialized by the proxy itself and shared by
  every host session it serves; restarted when it exits;
- the host's ``initialize`` is answered here from the server's own answer to the proxy's
  handshake (its version, capabilities, server info, instructions), with a new session id;
- any replica accepts any session id: it is only the trajectory's key (and id), whose record
  the replicas share through ``--store``; the host's ``clientInfo`` rides in the id, so every
  replica puts the same host on its spans;
- each request goes to the server under an id of the replica's own (and its progress token
  too), so the server's answer goes back to the HTTP request that asked; every message is
  read strictly and every ``tools/call`` checked by the stdio relay before it is forwarded,
  as in every other mode.

What needs a session living in one place is not relayed: the GET stream (405), server-to-client
requests (sampling, elicitation, roots: the proxy's handshake offers none, and one still
sent is answered with an error), notifications not tied to a request in flight (logging,
list changes, resource updates), ``resources/subscribe`` and ``logging/setLevel`` (refused
with -32601), and whatever state the server keeps per connection (tasks, subscriptions):
each replica's server is a process of its own. Progress notifications reach the request
that asked for them; a cancellation reaches the server when it lands on the replica that
holds the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
import toolguard as tg

from . import wire
from .relay_base import CONNECTION_CLOSED, METHOD_NOT_FOUND
from .replica_relay import SharedRelay
from .replica_sessions import ReplicaCalls, session_of

logger = logging.getLogger("toolguard.mcp")

_CLOSE_GRACE = 10.0
_QUICK_EXIT = 30.0  # a server that exits sooner after its start is restarted after a pause
_MAX_PAUSE = 10.0
# Requests that only work with a session living in one process: refused, never forwarded.
REFUSED = {
    "resources/subscribe": "resource updates need a session stream, which replicas do not keep",
    "resources/unsubscribe": "resource updates need a session stream, which replicas do not keep",
    "logging/setLevel": "the server is shared by every session of the replica, and its log "
    "messages have no session stream to go to",
}


class ReplicaStartError(Exception):
    """The server could not be started or did not answer the proxy's handshake."""


@dataclass(slots=True)
class _Pending:
    """A host request sent to the server under the replica's id ``new``."""

    outbox: Any  # the memory stream its HTTP request's answer goes out by
    id: Any  # the host's id
    token: Any  # the host's progress token, or None
    session: str
    generation: int = 0  # the server it went to (0: not sent yet)


@dataclass(slots=True)
class _Item:
    line: bytes
    session: str
    client: str | None
    new: Any = None


@dataclass
class _Out:
    """The relay's host writer for one server's life: what it writes goes to the replica's
    router; closed when the server is gone."""

    replica: Replica
    generation: int
    closed: bool = field(default=False)

    def write(self, data: bytes) -> None:
        self.replica.route(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.replica.lost(self.generation)


class Replica:
    """One replica: the life of its server, and the routing between the host requests of
    every session and that server (module docstring; replica_http.py serves it)."""

    def __init__(
        self, calls: ReplicaCalls, relay: Callable[[], SharedRelay], limit: int, security: Any
    ) -> None:
        self.calls = calls
        self.make_relay = relay
        self.limit = limit
        self.security = security
        self.relay: SharedRelay | None = None
        self.initialized: dict[str, Any] | None = None
        self.pending: dict[int, _Pending] = {}
        self.by_host: dict[tuple[str, Any], int] = {}  # (session, host id) -> the replica's id
        self.tokens: dict[int, int] = {}  # the replica's progress token -> its request
        self._ids = itertools.count(1)
        self.queue_in, self.queue = anyio.create_memory_object_stream[_Item](math.inf)
        self.generation = 0
        self.closing = False
        self.ready = asyncio.Event()
        self.task: asyncio.Task[int] | None = None

    # -- the server's life ---------------------------------------------------------------------
    async def start(self) -> int | None:
        """Start the server and wait for its handshake; None once ready, else the exit
        status. A contract that does not fit the server's tools raises here."""
        self.task = asyncio.create_task(self._supervise())
        ready = asyncio.create_task(self.ready.wait())
        await asyncio.wait({self.task, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if self.ready.is_set():
            return None
        return self.task.result()  # raises what the first start raised

    async def _supervise(self) -> int:
        pause = 0.0
        while True:
            self.generation += 1
            relay = self.make_relay()
            relay.host_writer = _Out(self, self.generation)
            started = time.monotonic()
            try:
                status = await relay._serve(
                    functools.partial(self._host, relay, self.generation),
                    probe=True,
                    signals=False,
                )
            except Exception as exc:
                if isinstance(exc, tg.ContractFileError):
                    raise
                if not self.ready.is_set():
                    raise ReplicaStartError(
                        "the server did not answer the proxy's initialize "
                        f"({exc or type(exc).__name__}); a replica answers every host's "
                        "initialize from it"
                    ) from exc
                logger.error("toolguard-mcp-proxy: the restarted server failed: %s", exc)
                status = 1
            finally:
                self.relay = None
            if self.closing:
                return 0
            if not self.ready.is_set():
                return status or 1
            lived = time.monotonic() - started
            pause = 0.0 if lived > _QUICK_EXIT else min(_MAX_PAUSE, max(0.25, pause * 2))
            logger.error(
                "toolguard-mcp-proxy: the server exited (status %s); restarting it%s",
                status,
                f" in {pause:g} s" if pause else "",
            )
            await asyncio.sleep(pause)

    async def _host(self, relay: SharedRelay, generation: int) -> None:
        await relay._from_lines(self._feed(relay, generation))

    async def _feed(self, relay: SharedRelay, generation: int) -> AsyncIterator[bytes]:
        """The host messages of every session, in the order they came, for one server."""
        self.relay = relay
        if relay.initialized is not None:
            self.initialized = relay.initialized
        self.ready.set()
        async for item in self.queue:
            if item.new is not None:
                entry = self.pending.get(item.new)
                if entry is None:  # its host went away before it was sent
                    continue
                entry.generation = generation
            relay.session = item.session
            relay.client = item.client
            yield item.line

    def lost(self, generation: int) -> None:
        """The server of ``generation`` is gone: its requests still unanswered get an error."""
        for new, entry in list(self.pending.items()):
            if entry.generation == generation:
                self._answer_host(
                    new,
                    {
                        "jsonrpc": "2.0",
                        "id": new,
                        "error": {
                            "code": CONNECTION_CLOSED,
                            "message": "the MCP server behind toolguard-mcp-proxy exited "
                            "before answering",
                        },
                    },
                )

    async def close(self) -> None:
        """Stop taking messages; the relay stops its server (bounded wait)."""
        self.closing = True
        self.queue_in.close()
        if self.task is not None:
            with anyio.move_on_after(_CLOSE_GRACE):
                await asyncio.shield(self.task)
            if not self.task.done():
                self.task.cancel()

    # -- the server's messages -------------------------------------------------------------------
    def route(self, data: bytes) -> None:
        """What the relay writes to the host: answers go to the request that asked."""
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            logger.warning("toolguard-mcp-proxy: the server wrote a line that is not JSON")
            return
        for item in parsed if isinstance(parsed, list) else [parsed]:
            if not isinstance(item, dict):
                continue
            if "method" not in item:
                self._answer_host(item.get("id"), item)
            elif "id" in item:
                self._server_request(item)
            else:
                self._notification(item)

    def _answer_host(self, new: Any, item: dict[str, Any]) -> None:
        entry = self.pending.pop(new, None) if type(new) is int else None
        if entry is None:
            logger.debug("toolguard-mcp-proxy: an answer for no request in flight: dropped")
            return
        self.by_host.pop((entry.session, entry.id), None)
        self.tokens.pop(new, None)
        _send(entry.outbox, {**item, "id": entry.id}, final=True)

    def _server_request(self, item: dict[str, Any]) -> None:
        relay = self.relay
        if relay is None:
            return
        if item.get("method") == "ping":
            answer = {"jsonrpc": "2.0", "id": item["id"], "result": {}}
            relay._to_server(orjson.dumps(answer) + b"\n")
            return
        logger.warning(
            "toolguard-mcp-proxy: the server sent a %s request: refused (replicas relay no "
            "server-to-client requests)",
            str(item.get("method"))[:64],
        )
        relay._reply_server(
            item["id"],
            METHOD_NOT_FOUND,
            "toolguard-mcp-proxy --replica relays no server-to-client requests: the host's "
            "answer could reach another replica",
        )

    def _notification(self, item: dict[str, Any]) -> None:
        params = item.get("params")
        if item.get("method") == "notifications/progress" and isinstance(params, dict):
            new = self.tokens.get(params.get("progressToken"))  # type: ignore[arg-type]
            entry = self.pending.get(new) if new is not None else None
            if entry is not None:
                params = {**params, "progressToken": entry.token}
                _send(entry.outbox, {**item, "params": params}, related=entry.id)
                return
        logger.debug("toolguard-mcp-proxy: a %s notification for no request: dropped", item)

    # -- the host's messages ---------------------------------------------------------------------
    def deliver(self, msg: dict[str, Any], sid: str, outbox: Any) -> bool:
        """One host message (read strictly and checked at the door) of session ``sid``;
        True when an answer will come on ``outbox``."""
        session, client = session_of(sid)
        method = msg.get("method")
        if method is None:  # an answer to a server request: none is relayed
            return False
        if "id" not in msg:
            if method == "notifications/cancelled":
                self._cancel(msg, session, client)
            return False
        rid = msg["id"]
        if method == "initialize":
            _send(outbox, {"jsonrpc": "2.0", "id": rid, "result": self.handshake()}, final=True)
            return True
        if method in REFUSED:
            error = {"code": METHOD_NOT_FOUND, "message": f"{method}: {REFUSED[method]}"}
            _send(outbox, {"jsonrpc": "2.0", "id": rid, "error": error}, final=True)
            return True
        new = next(self._ids)
        forward = {**msg, "id": new}
        params = msg.get("params")
        token = None
        meta = params.get("_meta") if isinstance(params, dict) else None
        if (
            isinstance(params, dict)
            and isinstance(meta, dict)
            and wire.valid_id(meta.get("progressToken"))
        ):
            token = meta["progressToken"]
            self.tokens[new] = new
            forward["params"] = {**params, "_meta": {**meta, "progressToken": new}}
        self.pending[new] = _Pending(outbox, rid, token, session)
        self.by_host[(session, rid)] = new
        self.queue_in.send_nowait(_Item(orjson.dumps(forward), session, client, new))
        return True

    def forget(self, msg: dict[str, Any], sid: str) -> None:
        """The HTTP request of ``msg`` is over (answered, or its host went away)."""
        session = session_of(sid)[0]
        new = self.by_host.pop((session, msg.get("id")), None)
        if new is not None:
            self.pending.pop(new, None)
            self.tokens.pop(new, None)

    def _cancel(self, msg: dict[str, Any], session: str, client: str | None) -> None:
        params = msg.get("params")
        rid = params.get("requestId") if isinstance(params, dict) else None
        new = self.by_host.get((session, rid)) if wire.valid_id(rid) else None
        if new is None:  # not in flight here (another replica's, or answered)
            return
        forward = {**msg, "params": {**params, "requestId": new}}  # type: ignore[dict-item]
        self.queue_in.send_nowait(_Item(orjson.dumps(forward), session, client))

    def handshake(self) -> dict[str, Any]:
        """The server's answer to the proxy's initialize, less what replicas cannot carry:
        list changes and resource updates (no session stream), logging, tasks."""
        result = dict(self.initialized or {})
        capabilities = dict(result.get("capabilities") or {})
        for gone in ("logging", "tasks"):
            capabilities.pop(gone, None)
        for name in ("tools", "resources", "prompts"):
            value = capabilities.get(name)
            if isinstance(value, dict):
                capabilities[name] = {
                    k: v for k, v in value.items() if k not in ("listChanged", "subscribe")
                }
        result["capabilities"] = capabilities
        return result


def _send(outbox: Any, item: dict[str, Any], *, final: bool = False, related: Any = None) -> None:
    from mcp.shared.message import ServerMessageMetadata, SessionMessage
    from mcp.types import jsonrpc_message_adapter

    try:
        message = jsonrpc_message_adapter.validate_python(item, by_name=False)
    except ValueError:
        logger.warning("toolguard-mcp-proxy: the server wrote a message that is not MCP")
        if not final:
            return
        message = jsonrpc_message_adapter.validate_python(
            {
                "jsonrpc": "2.0",
                "id": item.get("id"),
                "error": {"code": -32603, "message": "the server's answer is not valid MCP"},
            }
        )
    metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        outbox.send_nowait((SessionMessage(message, metadata=metadata), final))  # else: gone
