"""The proxy over streamable HTTP, bound to the loopback interface.

Each host session (``Mcp-Session-Id``) gets a server process of its own and the stdio
proxy's relay (:class:`~toolguard_mcp.relay.StdioRelay`) between the two: the whole protocol
goes through as over stdio (resources, prompts, completions, logging, sampling, elicitation,
roots, progress, whatever the server offers), every ``tools/call`` checked. The SDK's
``StreamableHTTPServerTransport`` speaks HTTP to the host (SSE streams, the GET stream,
DNS-rebinding protection); a server that crashes ends its session only, and the next session
starts a new one. Before anything is served the server is started once to declare its tools,
so a contract that does not fit stops the proxy there.

The 2026-07-28 era (no session, no handshake) is not relayed over HTTP: such a request is
answered with HTTP 400 and a JSON-RPC error saying so.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import signal
import socket
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
import orjson

from . import (
    _sdk,  # noqa: F401  (the SDK, or an ImportError naming the extra)
    wire,
)
from .calls import CallGuard
from .relay import LINE_LIMIT, StdioRelay

logger = logging.getLogger("toolguard.mcp")

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_CLOSE_GRACE = 10.0  # the relays' own stop sequence takes up to 3 x 2 s per server
_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"


def _ignore(signum: int, frame: Any) -> None:
    return None


async def serve_http(
    calls: CallGuard,
    command: Sequence[str],
    *,
    host: str,
    port: int,
    timeout: float | None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    token: str | None = None,
    limit: int = LINE_LIMIT,
    replica: bool = False,
) -> int:
    """Serve ``command`` at ``http://host:port/mcp`` until stopped (SIGINT, SIGTERM); returns
    the exit status. Announces the address on the log once listening. ``token``: hosts must
    send ``Authorization: Bearer TOKEN`` (401 otherwise). ``replica``: one server shared by
    every session, any session id served (:mod:`toolguard_mcp.replica`; ``calls`` is then a
    :class:`~toolguard_mcp.replica.ReplicaCalls`). A contract that does not fit the server's
    tools raises :class:`toolguard.ContractFileError` before anything is served."""

    def relay() -> StdioRelay:
        return StdioRelay(
            calls, command, host_in=-1, host_out=-1, timeout=timeout, env=env, cwd=cwd, limit=limit
        )

    if replica:
        from .replica_http import serve_replica

        return await serve_replica(calls, command, host, port, timeout, env, cwd, token, limit)
    if not await relay().probe_only():
        return 127
    async with anyio.create_task_group() as group:
        sessions = Sessions(calls, relay, group, host, limit)
        try:
            await _serve_app(sessions, host, port, token)
        finally:
            await sessions.close()
            group.cancel_scope.cancel()
    return 0


async def _serve_app(
    app: Any, host: str, port: int, token: str | None, *, until: asyncio.Future[Any] | None = None
) -> None:
    """Serve the ASGI ``app`` with uvicorn until SIGINT or SIGTERM (or ``until`` is done)."""
    import uvicorn

    if token is not None:
        app = bearer_only(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    http = uvicorn.Server(config)
    if until is not None:
        until.add_done_callback(lambda _: setattr(http, "should_exit", True))
    # Bound here, so the address is known (port 0 picks a free one) and connections made
    # as soon as it is announced wait in the backlog.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    where = f"[{host}]" if ":" in host else host
    logger.warning("toolguard-mcp-proxy: serving http://%s:%d/mcp", where, bound)
    # uvicorn shuts down gracefully on SIGINT / SIGTERM, then raises the signal again
    # under the handlers it found: these let the proxy stop the servers and write the
    # trajectories' summaries instead of dying there.
    previous = {sig: signal.signal(sig, _ignore) for sig in _STOP_SIGNALS}
    try:
        await http.serve(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _security() -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


class Sessions:
    """The ASGI app: one :class:`StdioRelay` (and server process) per streamable-HTTP session."""

    def __init__(
        self, calls: CallGuard, relay: Any, group: Any, host: str, limit: int = LINE_LIMIT
    ) -> None:
        self.calls = calls
        self.limit = limit
        self.relay = relay
        self.group = group
        self.open: dict[str, Any] = {}
        self.running: set[anyio.Event] = set()  # one per session still relaying
        self.security = _security()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = await front_door(scope, send)
        if headers is None:
            return
        sid = headers.get(_SESSION_HEADER)
        if scope.get("method") == "POST":
            body = await _body(receive, self.limit)
            refusal = _strict(body)
            if refusal is not None:
                if refusal.call is not None:
                    name, meta = refusal.call
                    session = f"mcp-session:{sid.decode('latin-1')}" if sid else None
                    self.calls.record_refusal(name, refusal.message, meta, session)
                await _answer(send, 400, refusal.answer())
                return
            assert body is not None  # a body past the limit is refused above
            receive = _replay(body)
        if sid is None:
            transport = await self._start()
        else:
            transport = self.open.get(sid.decode("latin-1"))
            if transport is None:
                await _status(send, 404, "Session not found")
                return
        await transport.handle_request(scope, receive, send)
        if transport.is_terminated:
            self.open.pop(transport.mcp_session_id, None)

    async def _start(self) -> Any:
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        sid = uuid.uuid4().hex
        transport = StreamableHTTPServerTransport(
            mcp_session_id=sid, security_settings=self.security
        )
        self.open[sid] = transport
        await self.group.start(self._run, transport)
        return transport

    async def _run(self, transport: Any, *, task_status: Any) -> None:
        sid = transport.mcp_session_id
        relay = self.relay()
        relay.session = f"mcp-session:{sid}"
        finished = anyio.Event()
        self.running.add(finished)
        try:
            async with transport.connect() as (read_stream, write_stream):
                task_status.started()
                writer = SessionWriter(write_stream, relay)
                async with anyio.create_task_group() as group:
                    group.start_soon(writer.pump)
                    # The pump ends once the relay closed the writer and the last answers
                    # (errors for calls in flight when a server died) are out.
                    status = await relay.run_session(_lines(read_stream), writer)
                if status:
                    logger.error(
                        "toolguard-mcp-proxy: the server of session %s exited (code %s); the "
                        "next session starts a new one",
                        sid[:8],
                        status,
                    )
        finally:
            self.open.pop(sid, None)
            with anyio.CancelScope(shield=True):
                await transport.terminate()
            self.calls.end_session(relay.session)
            self.running.discard(finished)
            finished.set()

    async def close(self) -> None:
        """End every session: its streams closed, its relay stops its server (bounded wait)."""
        for transport in list(self.open.values()):
            with anyio.CancelScope(shield=True):
                await transport.terminate()
        with anyio.move_on_after(_CLOSE_GRACE):
            for finished in list(self.running):
                await finished.wait()


async def _lines(read_stream: Any) -> AsyncIterator[bytes]:
    """The host's messages as JSON text, for the relay's strict parse."""
    async for item in read_stream:
        if isinstance(item, Exception):  # the transport could not parse a POST's body
            logger.warning("toolguard-mcp-proxy: a host message was refused: %s", item)
            continue
        try:
            text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        except ValueError:
            # A lone surrogate the SDK's parser let through: written escaped, so the relay's
            # strict parse refuses it with the request's id (never forwarded).
            data = item.message.model_dump(by_alias=True, exclude_unset=True)
            text = json.dumps(data, ensure_ascii=True, default=str)
        yield text.encode()


class SessionWriter:
    """The relay's host writer for one HTTP session: each message goes to the transport,
    which puts a response on the stream of its request, progress on the stream of the request
    that asked for it, and the rest on the session's GET stream (or the stream of the one
    request in flight)."""

    def __init__(self, write_stream: Any, relay: StdioRelay) -> None:
        self.write_stream = write_stream
        self.relay = relay
        self.send, self.receive = anyio.create_memory_object_stream[Any](math.inf)

    def write(self, data: bytes) -> None:
        from mcp.shared.message import ServerMessageMetadata, SessionMessage
        from mcp.types import jsonrpc_message_adapter

        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            logger.warning("toolguard-mcp-proxy: the server wrote a line that is not JSON")
            return
        for item in parsed if isinstance(parsed, list) else [parsed]:
            try:
                message = jsonrpc_message_adapter.validate_python(item, by_name=False)
            except ValueError:
                logger.warning("toolguard-mcp-proxy: the server wrote a message that is not MCP")
                continue
            related = self._related(item)
            metadata = ServerMessageMetadata(related_request_id=related) if related else None
            self.send.send_nowait(SessionMessage(message, metadata=metadata))

    def _related(self, item: Any) -> Any:
        if not isinstance(item, dict) or "method" not in item:
            return None
        params = item.get("params")
        if item["method"] == "notifications/progress" and isinstance(params, dict):
            return self.relay.progress.get(params.get("progressToken"))
        inflight = list(self.relay.inflight)
        return inflight[0] if len(inflight) == 1 else None

    async def pump(self) -> None:
        async for message in self.receive:
            await self.write_stream.send(message)

    async def drain(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def close(self) -> None:
        self.send.close()


async def _body(receive: Any, limit: int) -> bytes | None:
    """A POST's body, or None past ``limit`` bytes (then the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes) -> Any:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await anyio.sleep_forever()  # the transport listens for a disconnect: none comes
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _strict(body: bytes | None) -> wire.Refusal | None:
    """The stdio relay's strict reading, at the door: what the SDK's parser would take
    leniently (``NaN``, ``7.0`` as an id) is refused before it reaches the transport."""
    if body is None:
        return wire.Refusal(wire.INVALID_REQUEST, "Invalid Request: the message is over the limit")
    parsed = wire.parse(body)
    if isinstance(parsed, wire.Refusal):
        return parsed
    for item in parsed if isinstance(parsed, list) else [parsed]:
        refusal = wire.check(item)
        if refusal is not None:
            return refusal
    return None


async def front_door(scope: Any, send: Any) -> dict[bytes, bytes] | None:
    """What every request to the proxy's HTTP endpoint passes first (both modes): HTTP, the
    ``/mcp`` path, a protocol version the proxy relays. Its headers, or None once refused."""
    if scope["type"] != "http":
        return None
    if scope["path"].rstrip("/") != "/mcp":
        await _status(send, 404, "not found: the MCP endpoint is /mcp")
        return None
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    headers: dict[bytes, bytes] = dict(scope["headers"])
    version = headers.get(_VERSION_HEADER)
    if version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
        await _status(
            send,
            400,
            "toolguard-mcp-proxy relays the handshake eras of MCP over HTTP, not "
            f"protocol version {version.decode('latin-1')[:32]}",
        )
        return None
    return headers


async def _status(send: Any, status: int, message: str) -> None:
    await _answer(
        send, status, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    )


async def _answer(send: Any, status: int, answer: Any) -> None:
    body = orjson.dumps(answer)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def bearer_only(app: Any, token: str) -> Any:
    """``app`` (ASGI) answering 401 to an HTTP request without ``Authorization: Bearer
    token``. Compared in constant time; the token is never logged."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            if not hmac.compare_digest(given, expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded
