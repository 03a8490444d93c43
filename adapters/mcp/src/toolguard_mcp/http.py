"""The proxy over streamable HTTP, bound to the loopback interface.

Each host session (``Mcp-Session-Id``) gets a server process of its own and the stdio
proxy's relay (:class:`~toolguard_mcp.relay.StdioRelay`) between the two: the whole protocol
goes through as over stdio (resources, prompts, completions, logging, sampling, elicitation,
roots, progress, whatever the server offers), every ``tools/call`` checked. The SDK's
``StreamableHTTPServerTransport`` speaks HTTP to the host (SSE streams, the GET stream,
DNS-rebinding protection); a server that crashes ends its session only, saying so, and the
next session starts a new one (:mod:`toolguard_mcp.http_sessions`). Before anything is served
the server is started once to declare its tools, so a contract that does not fit stops the
proxy there. Every POST body is read strictly here first, as the stdio relay reads a line; a
JSON-RPC batch is refused (the SDK's transport takes one message per POST).

The 2026-07-28 era (no session, no handshake) is not relayed over HTTP: such a request is
answered with HTTP 400 and a JSON-RPC error saying so.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import signal
import socket
from collections.abc import Mapping, Sequence
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
    failed = await relay().probe_only()
    if failed is not None:
        return failed
    from .http_sessions import Sessions

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


def _batch_refusal(body: bytes) -> tuple[Any, list[tuple[str, Any]], str] | None:
    """A JSON-RPC batch (MCP 2025-03-26) is not relayed over HTTP (the SDK's transport takes
    one message per POST, and MCP 2025-06-18 has no batches): refused whole, each request in
    it answered with an error of its own as JSON-RPC 2.0 says (``[]``, or a batch of
    notifications only, with one error). Returns (the answer, the ``tools/call`` in it as
    (name, ``_meta``) to record as refused steps, the reason); None for a single message."""
    if body.lstrip()[:1] != b"[":
        return None
    items = orjson.loads(body)  # read strictly by _strict already
    if not items:
        return wire.Refusal(wire.INVALID_REQUEST, "Invalid Request: empty batch").answer(), [], ""
    why = (
        "Invalid Request: toolguard-mcp-proxy relays one JSON-RPC message per POST over "
        "streamable HTTP, not a batch: send each message on its own"
    )
    answers, calls = [], []
    for item in items:  # each an object whose id and params wire.check let through
        if item.get("method") == "tools/call":
            calls.append((item["params"]["name"], item["params"].get("_meta")))
        if "id" in item and "method" in item:  # a request (notifications, responses: none)
            answers.append(wire.Refusal(wire.INVALID_REQUEST, why, item["id"]).answer())
    return (answers or wire.Refusal(wire.INVALID_REQUEST, why).answer()), calls, why


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
