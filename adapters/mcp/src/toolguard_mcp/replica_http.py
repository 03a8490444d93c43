"""The ASGI app of a replica (:mod:`toolguard_mcp.replica`): each POST served through a
streamable-HTTP transport of its own, as the SDK's ``StreamableHTTPSessionManager`` does in
its stateless mode (which needs an SDK ``Server`` to run, where the proxy relays to a
process), but with the session id the request carries, so the host keeps its session
whichever replica it reaches. The transport speaks HTTP (SSE or JSON answers, the headers,
DNS-rebinding protection); what goes to the server is the message as the proxy read it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import orjson
import toolguard as tg

from .calls import CallGuard
from .http import (
    _SESSION_HEADER,
    _answer,
    _body,
    _replay,
    _security,
    _serve_app,
    _status,
    _strict,
    front_door,
)
from .replica import Replica, ReplicaStartError
from .replica_relay import SharedRelay
from .replica_sessions import ReplicaCalls, new_session_id, session_of, valid_session_id

logger = logging.getLogger("toolguard.mcp")


async def serve_replica(
    calls: CallGuard,
    command: Sequence[str],
    host: str,
    port: int,
    timeout: float | None,
    env: Mapping[str, str] | None,
    cwd: str | None,
    token: str | None,
    limit: int,
) -> int:
    """``serve_http`` for a replica: its server started and initialized, then its app
    served until stopped (or until its server cannot be restarted)."""
    assert isinstance(calls, ReplicaCalls)

    def relay() -> SharedRelay:
        return SharedRelay(
            calls, command, host_in=-1, host_out=-1, timeout=timeout, env=env, cwd=cwd, limit=limit
        )

    replica = Replica(calls, relay, limit, _security())
    try:
        status = await replica.start()
    except ReplicaStartError as exc:
        logger.error("toolguard-mcp-proxy: %s", exc)
        await replica.close()
        return 1
    if status is not None:
        return status
    assert replica.task is not None
    try:
        # A server that cannot be restarted (its tools no longer fit the contract) stops the
        # replica: its requests would wait for nothing, and the balancer sends them elsewhere.
        await _serve_app(ReplicaApp(replica), host, port, token, until=replica.task)
    finally:
        failed = replica.task.done() and not replica.closing
        await replica.close()
    if not failed:
        return 0
    gone = replica.task.exception() if not replica.task.cancelled() else None
    if isinstance(gone, tg.ContractFileError):
        raise gone
    logger.error("toolguard-mcp-proxy: the replica's server is gone (%s): stopping", gone)
    return 1


class ReplicaApp:
    """``/mcp`` of one replica: POST relayed, DELETE ends the session's trajectory, GET 405."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        # The SDK logs each transport's end at INFO: here that is every request (-v).
        logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = await front_door(scope, send)
        if headers is None:
            return
        if not await self._secure(scope, receive, send):
            return
        raw = headers.get(_SESSION_HEADER)
        sid = raw.decode("latin-1") if raw is not None else None
        if sid is not None and not valid_session_id(sid):
            await _status(send, 400, "Bad Request: the Mcp-Session-Id is not one of this proxy's")
            return
        method = scope.get("method")
        if method == "POST":
            await self._post(scope, receive, send, sid)
        elif method == "DELETE":
            if sid is None:
                await _status(send, 400, "Bad Request: Missing session ID")
                return
            calls = self.replica.calls  # its summary may wait for the store: in a thread then
            await calls.offload.run(calls.end_replica_session, session_of(sid)[0])
            await _empty(send, 200)
        else:
            # No GET stream: what it would carry needs a session living in one replica.
            await _empty(send, 405, [(b"allow", b"POST, DELETE")])

    async def _secure(self, scope: Any, receive: Any, send: Any) -> bool:
        from mcp.server.transport_security import TransportSecurityMiddleware
        from starlette.requests import Request

        request = Request(scope, receive)
        refused = await TransportSecurityMiddleware(self.replica.security).validate_request(
            request, is_post=scope.get("method") == "POST"
        )
        if refused is not None:
            await refused(scope, receive, send)
            return False
        return True

    async def _post(self, scope: Any, receive: Any, send: Any, sid: str | None) -> None:
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        body = await _body(receive, self.replica.limit)
        refusal = _strict(body)
        if refusal is not None:
            if refusal.call is not None:
                name, meta = refusal.call
                session = session_of(sid)[0] if sid else None
                calls = self.replica.calls
                await calls.offload.run(calls.record_refusal, name, refusal.message, meta, session)
            await _answer(send, 400, refusal.answer())
            return
        assert body is not None  # a body past the limit is refused above
        msg = orjson.loads(body)
        if not isinstance(msg, dict):
            await _status(
                send, 400, "Invalid Request: a replica relays one JSON-RPC message per POST"
            )
            return
        if sid is None and msg.get("method") == "initialize":
            sid = new_session_id(msg)
        # Without a session id only initialize is served: the transport answers 400 then.
        transport = StreamableHTTPServerTransport(
            mcp_session_id=sid or "-", security_settings=self.replica.security
        )
        outbox_in, outbox = anyio.create_memory_object_stream[Any](math.inf)
        try:
            async with anyio.create_task_group() as group:
                await group.start(self._relay, transport, msg, sid, outbox_in, outbox)
                await transport.handle_request(scope, _replay(body), send)
                group.cancel_scope.cancel()
        finally:
            outbox_in.close()
            if sid is not None:
                self.replica.forget(msg, sid)
            with anyio.CancelScope(shield=True):
                await transport.terminate()

    async def _relay(
        self,
        transport: Any,
        msg: dict[str, Any],
        sid: str | None,
        outbox_in: Any,
        outbox: Any,
        *,
        task_status: Any,
    ) -> None:
        """The transport's side of one POST: its message handed to the replica (what the
        transport read is what the proxy read: one message, checked at the door), then the
        answer and the progress of its request written back."""
        async with transport.connect() as (read_stream, write_stream):
            task_status.started()
            async for item in read_stream:
                answered = not isinstance(item, Exception) and sid is not None  # else: refused
                if answered and self.replica.deliver(msg, sid, outbox_in):  # type: ignore[arg-type]
                    async for message, final in outbox:
                        await write_stream.send(message)
                        if final:
                            break
                break
            # The streams stay open until the transport has written the answer out: the
            # POST's handler cancels this once it returns.
            await anyio.sleep_forever()


async def _empty(send: Any, status: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", b"0"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": b""})
