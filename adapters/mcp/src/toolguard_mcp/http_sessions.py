"""The sessions of the proxy over streamable HTTP (:mod:`toolguard_mcp.http`): each host
session (``Mcp-Session-Id``) gets a server process of its own, started before the session
opens, and the stdio proxy's relay (:class:`~toolguard_mcp.relay.StdioRelay`) between the
two, the SDK's ``StreamableHTTPServerTransport`` speaking HTTP to the host.

A server that exits ends its own session only, and says so: the session's requests in flight
and those already on their way are answered with a JSON-RPC error naming the exit, a later
request of the session gets HTTP 404 saying why, and the next session starts a new server (a
server that cannot be started: HTTP 502 for the ``initialize`` that asked).
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import math
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import orjson

from . import wire
from .calls import CallGuard
from .http import (
    _CLOSE_GRACE,
    _SESSION_HEADER,
    _answer,
    _batch_refusal,
    _body,
    _replay,
    _security,
    _status,
    _strict,
    front_door,
)
from .relay import LINE_LIMIT, StdioRelay
from .relay_base import CONNECTION_CLOSED

logger = logging.getLogger("toolguard.mcp")

_NO_SESSION = "Bad Request: no Mcp-Session-Id (a session starts with the POST of its initialize)"
_NO_SERVER = "toolguard-mcp-proxy could not start the MCP server for a new session (see its log)"
_ENDED_KEPT = 1024  # sessions whose server exited, remembered to say so to a late request


class _Session:
    """One host session: its transport, and the POSTs being handled (the one that opened it
    first), so the requests already on their way when its server exits are answered."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.posts = 1
        self.quiet = anyio.Event()  # set once no POST of the session is being handled

    def post_started(self) -> None:
        if self.posts == 0:
            self.quiet = anyio.Event()  # quiet no longer
        self.posts += 1

    def post_done(self) -> None:
        self.posts -= 1
        if self.posts == 0:
            self.quiet.set()


class Sessions:
    """The ASGI app: one :class:`StdioRelay` (and server process) per streamable-HTTP session."""

    def __init__(
        self, calls: CallGuard, relay: Any, group: Any, host: str, limit: int = LINE_LIMIT
    ) -> None:
        self.calls = calls
        self.limit = limit
        self.relay = relay
        self.group = group
        self.open: dict[str, _Session] = {}
        # Sessions whose server exited, and why: a later request of one is told so with its 404.
        self.ended: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.running: set[anyio.Event] = set()  # one per session still relaying
        self.security = _security()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = await front_door(scope, send)
        if headers is None:
            return
        sid = headers.get(_SESSION_HEADER)
        post = scope.get("method") == "POST"
        if post:
            body = await _body(receive, self.limit)
            refusal = _strict(body)
            if refusal is not None:
                await self._record([refusal.call] if refusal.call else [], refusal.message, sid)
                await _answer(send, 400, refusal.answer())
                return
            assert body is not None  # a body past the limit is refused above
            batch = _batch_refusal(body)
            if batch is not None:
                answer, calls, why = batch
                await self._record(calls, why, sid)
                await _answer(send, 400, answer)
                return
            receive = _replay(body)
        if sid is None:
            if not post:
                await _status(send, 400, _NO_SESSION)
                return
            session = await self._start()
            if session is None:
                await _answer(send, 502, _error(None, _NO_SERVER))
                return
        else:
            found = self.open.get(sid.decode("latin-1"))
            if found is None:
                gone = self.ended.get(sid.decode("latin-1"))
                text = "Session not found"
                if gone is not None:
                    text += f": {gone}; start a new session (initialize)"
                await _status(send, 404, text)
                return
            session = found
            if post:
                session.post_started()
        try:
            await session.transport.handle_request(scope, receive, send)
        finally:
            if post:
                session.post_done()
        if session.transport.is_terminated:
            self.open.pop(session.transport.mcp_session_id, None)

    async def _record(self, calls: list[tuple[str, Any]], why: str, sid: bytes | None) -> None:
        """Each ``tools/call`` refused at the door, recorded as a blocked step (in a thread
        with a shared store: :mod:`.offload`)."""
        session = f"mcp-session:{sid.decode('latin-1')}" if sid else None
        for name, meta in calls:
            await self.calls.offload.run(self.calls.record_refusal, name, why, meta, session)

    async def _start(self) -> _Session | None:
        """A new session, its server started first (None when it cannot be)."""
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        sid = uuid.uuid4().hex
        relay = self.relay()
        relay.session = f"mcp-session:{sid}"
        writer = SessionWriter(relay, lambda code: self._gone(sid, code))
        if not await relay.start_session(writer):
            return None
        transport = StreamableHTTPServerTransport(
            mcp_session_id=sid, security_settings=self.security
        )
        session = self.open[sid] = _Session(transport)
        await self.group.start(self._run, session, relay, writer)
        return session

    async def _run(
        self, session: _Session, relay: StdioRelay, writer: SessionWriter, *, task_status: Any
    ) -> None:
        transport = session.transport
        sid = transport.mcp_session_id
        finished = anyio.Event()
        self.running.add(finished)
        try:
            async with transport.connect() as (read_stream, write_stream):
                task_status.started()
                async with anyio.create_task_group() as group:
                    group.start_soon(writer.pump, write_stream)
                    # The pump ends once the relay closed the writer and the last answers
                    # (errors for requests in flight when a server died) are out.
                    await relay.run_session(_lines(read_stream, writer), writer)
                if writer.exited:
                    await _answer_gone(read_stream, write_stream, session, _exited(writer.code))
                # Terminated before the streams close, so the SDK's router ends quietly.
                if not transport.is_terminated:
                    await transport.terminate()
        finally:
            self.open.pop(sid, None)
            if not transport.is_terminated:
                with anyio.CancelScope(shield=True):
                    await transport.terminate()
            with anyio.CancelScope(shield=True):  # its summary may wait for the store
                await self.calls.offload.run(self.calls.end_session, relay.session)
            self.running.discard(finished)
            finished.set()

    def _gone(self, sid: str, code: int | None) -> None:
        """The session's server exited: from now on its requests get a 404 saying so (set
        before the host can hear of the exit, so a request it sends next always does)."""
        logger.error(
            "toolguard-mcp-proxy: session %s is over: its server exited (code %s); the next "
            "session starts a new one",
            sid[:8],
            code,
        )
        self.open.pop(sid, None)
        self.ended[sid] = _exited(code)
        while len(self.ended) > _ENDED_KEPT:
            self.ended.popitem(last=False)

    async def close(self) -> None:
        """End every session: its streams closed, its relay stops its server (bounded wait)."""
        for session in list(self.open.values()):
            with anyio.CancelScope(shield=True):
                await session.transport.terminate()
        with anyio.move_on_after(_CLOSE_GRACE):
            for finished in list(self.running):
                await finished.wait()


async def _answer_gone(read_stream: Any, write_stream: Any, session: _Session, why: str) -> None:
    """Once a session's server is gone: the requests still on their way to it (POSTs being
    handled, the first one's ``initialize`` included) are answered with an error saying so."""
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    async def refuse() -> None:
        async for item in read_stream:
            message = getattr(item, "message", None)
            rid, method = getattr(message, "id", None), getattr(message, "method", None)
            if method is not None and wire.valid_id(rid):
                answer = _error(rid, _gone_message(method, why))
                error = jsonrpc_message_adapter.validate_python(answer, by_name=False)
                await write_stream.send(SessionMessage(error))

    if session.posts == 0:
        return
    with anyio.move_on_after(_CLOSE_GRACE), contextlib.suppress(anyio.ClosedResourceError):
        async with anyio.create_task_group() as group:
            group.start_soon(refuse)
            await session.quiet.wait()
            group.cancel_scope.cancel()


def _exited(code: int | None) -> str:
    return f"the MCP server behind toolguard-mcp-proxy exited (code {code})"


def _gone_message(method: str, why: str) -> str:
    return f"{why} before answering {method[:64]}; this session is over: start a new one"


def _error(rid: Any, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": CONNECTION_CLOSED, "message": message}}


async def _lines(read_stream: Any, writer: SessionWriter) -> AsyncIterator[bytes]:
    """The host's messages as JSON text, for the relay's strict parse; each request noted on
    ``writer`` until it is answered."""
    try:
        async for item in read_stream:
            if isinstance(item, Exception):  # the transport could not parse a POST's body
                logger.warning("toolguard-mcp-proxy: a host message was refused: %s", item)
                continue
            message = item.message
            rid, method = getattr(message, "id", None), getattr(message, "method", None)
            if method is not None and wire.valid_id(rid):
                writer.asked[rid] = method
            try:
                text = message.model_dump_json(by_alias=True, exclude_unset=True)
            except ValueError:
                # A lone surrogate the SDK's parser let through: written escaped, so the
                # relay's strict parse refuses it with the request's id (never forwarded).
                data = message.model_dump(by_alias=True, exclude_unset=True)
                text = json.dumps(data, ensure_ascii=True, default=str)
            yield text.encode()
    except (anyio.ClosedResourceError, anyio.EndOfStream):
        return  # the session was terminated (the proxy is stopping)


class SessionWriter:
    """The relay's host writer for one HTTP session: each message goes to the transport,
    which puts a response on the stream of its request, progress on the stream of the request
    that asked for it, and the rest on the session's GET stream (or the stream of the one
    request in flight). When the server exits, the host's requests it has not answered get
    an error saying so (the relay answers the calls in flight itself)."""

    def __init__(self, relay: StdioRelay, on_exit: Callable[[int | None], None]) -> None:
        self.relay = relay
        self.on_exit = on_exit
        self.asked: dict[Any, str] = {}  # the host's requests not answered yet: id -> method
        self.exited = False
        self.code: int | None = None
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
            if "method" not in item and wire.valid_id(item.get("id")):
                self.asked.pop(item["id"], None)
            related = self._related(item)
            metadata = ServerMessageMetadata(related_request_id=related) if related else None
            self.send.send_nowait(SessionMessage(message, metadata=metadata))

    def server_exited(self, code: int | None) -> None:
        """The relay's word that the server exited (its calls in flight answered already)."""
        self.exited, self.code = True, code
        self.on_exit(code)
        why = _exited(code)
        for rid, method in list(self.asked.items()):
            self.write(orjson.dumps(_error(rid, _gone_message(method, why))))

    def _related(self, item: Any) -> Any:
        if not isinstance(item, dict) or "method" not in item:
            return None
        params = item.get("params")
        if item["method"] == "notifications/progress" and isinstance(params, dict):
            return self.relay.progress.get(params.get("progressToken"))
        inflight = list(self.relay.inflight)
        return inflight[0] if len(inflight) == 1 else None

    async def pump(self, write_stream: Any) -> None:
        async for message in self.receive:
            await write_stream.send(message)

    async def drain(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def close(self) -> None:
        self.send.close()
