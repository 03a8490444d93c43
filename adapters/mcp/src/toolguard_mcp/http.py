"""The proxy over streamable HTTP, bound to the loopback interface.

Unlike stdio, one HTTP endpoint serves many host sessions, so this side runs the SDK on
both ends: an MCP ``Server`` (the SDK's streamable-HTTP app, DNS-rebinding protection on)
whose handlers forward to one ``Client`` session with the server subprocess, guarded by
:class:`~toolguard_mcp.server.GuardMiddleware`. The tool list served is the server's.
"""

from __future__ import annotations

import hmac
import logging
import signal
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import toolguard as tg

from . import _sdk  # noqa: F401  (the SDK, or an ImportError naming the extra)
from ._meta import RESERVED_PREFIX
from .calls import CallGuard
from .server import GuardMiddleware, UpstreamTimeout

logger = logging.getLogger("toolguard.mcp")

# Request _meta keys the proxy's own client session sets itself for the server.
_OWN_META = frozenset({"progressToken", "traceparent", "tracestate"})
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _ignore(signum: int, frame: Any) -> None:
    return None


def forwarded_meta(meta: Any) -> dict[str, Any] | None:
    """The host's ``_meta`` minus what the transport and the client session own."""
    if not isinstance(meta, Mapping):
        return None
    out = {
        k: v
        for k, v in meta.items()
        if isinstance(k, str) and k not in _OWN_META and not k.startswith(RESERVED_PREFIX)
    }
    return out or None


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
) -> int:
    """Serve ``command``'s tools at ``http://host:port/mcp`` until stopped (SIGINT, SIGTERM)
    or the server exits; returns the exit status. Announces the address on the log once
    listening. ``token``: hosts must send ``Authorization: Bearer TOKEN`` (401 otherwise).
    A contract that does not fit the server's tools raises :class:`tg.ContractFileError`
    before anything is served."""
    unfit: list[tg.ContractFileError] = []
    status = await _serve(calls, command, host, port, timeout, env, cwd, token, unfit)
    if unfit:  # raised here, outside the SDK's task groups: one line, no traceback
        raise unfit[0]
    return status


async def _serve(
    calls: CallGuard,
    command: Sequence[str],
    host: str,
    port: int,
    timeout: float | None,
    env: Mapping[str, str] | None,
    cwd: str | None,
    token: str | None,
    unfit: list[tg.ContractFileError],
) -> int:
    import uvicorn
    from mcp import Client, StdioServerParameters
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    params = StdioServerParameters(
        command=command[0], args=list(command[1:]), env=dict(env or {}), cwd=cwd
    )
    status = 0
    async with Client(params, cache=None) as upstream:
        tools: list[Any] = []
        cursor = None
        while True:
            page = await upstream.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        try:
            calls.declare_tools(tools, at_start=True)
        except tg.ContractFileError as exc:
            unfit.append(exc)
            return 2
        http: uvicorn.Server | None = None

        async def list_tools(ctx: Any, request: Any) -> Any:
            page = await upstream.session.list_tools(params=request)
            calls.declare_tools(page.tools, complete=not page.next_cursor)  # pins compared
            policy = calls.policy
            if policy is None:
                return page
            served = [t for t in page.tools if not policy.denied(t.name)]
            return page.model_copy(update={"tools": served})

        async def call_tool(ctx: Any, request: Any) -> Any:
            nonlocal status
            raw = ctx.params.get("_meta") if isinstance(ctx.params, Mapping) else None
            try:
                return await upstream.session.call_tool(
                    request.name,
                    request.arguments,
                    read_timeout_seconds=timeout,
                    meta=forwarded_meta(raw),  # type: ignore[arg-type]  # a JSON object
                )
            except MCPError as exc:
                if exc.code == REQUEST_TIMEOUT:
                    raise UpstreamTimeout(
                        f"The tool `{request.name}` did not answer within {timeout:g} s; "
                        "toolguard-mcp-proxy cancelled the call."
                    ) from exc
                if exc.code == CONNECTION_CLOSED and http is not None:
                    logger.error("toolguard-mcp-proxy: the MCP server exited; stopping")
                    status = 1
                    http.should_exit = True
                raise

        info = upstream.server_info
        server: Server[Any] = Server(
            info.name if info is not None else "toolguard-mcp-proxy",
            version=info.version if info is not None else "",
            instructions=upstream.instructions,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
        server.middleware.append(GuardMiddleware(calls, server=server))
        app: Any = server.streamable_http_app(host=host)
        if token is not None:
            app = bearer_only(app, token)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        http = uvicorn.Server(config)
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
        # under the handlers it found: these let the proxy stop the server and write the
        # trajectories' summaries instead of dying there.
        previous = {sig: signal.signal(sig, _ignore) for sig in _STOP_SIGNALS}
        try:
            await http.serve(sockets=[sock])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return status


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
