"""The stdio relay's state and its server side: what the server sends is routed to the host
(answers alone or into their batch's array, tool lists filtered by the contract), answers
close the calls the guard admitted, and the proxy's own requests get their answers.
:class:`toolguard_mcp.relay.StdioRelay` adds the host side and the run."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
import toolguard as tg

from . import _io, refusals, relay_aside, wire
from .calls import CallGuard
from .relay_aside import safely as _safely

logger = logging.getLogger("toolguard.mcp")

LINE_LIMIT = _io.LINE_LIMIT
CONNECTION_CLOSED = -32000  # mcp.types.CONNECTION_CLOSED, without importing the SDK
METHOD_NOT_FOUND = -32601
_STOP_GRACE = 2.0  # the MCP shutdown sequence: close stdin, wait, SIGTERM, wait, SIGKILL
_MAX_EXPIRED = 10_000
_LIST_TIMEOUT = 60.0
PROBE_VERSION = "2025-06-18"
# The protocol era of a connection: the handshake (initialize), or 2026-07-28 (an envelope in
# every request's _meta).
Era = Literal["handshake", "2026-07-28"]


class ServerError(Exception):
    """The server answered a ``tools/call`` with a JSON-RPC error."""

    def __init__(self, code: Any, message: str) -> None:
        # The text stays out of str(): telemetry records str(exc), and a server's error
        # message may quote argument values (docs/protocol.md, section 6.3).
        super().__init__(f"the server answered with JSON-RPC error {code}")
        self.code = code
        self.message = message


class ServerExited(Exception):
    def __init__(self, code: int | None) -> None:
        super().__init__(f"the MCP server exited (code {code}) before answering")
        self.code = code


@dataclass(slots=True)
class _Inflight:
    pending: tg.PendingCall
    name: str
    deadline: float | None  # the loop's time when the call times out (--timeout)
    params: dict[str, Any]  # the call's tools/call params
    session: str | None  # the session it came in (a replica serves many)


@dataclass(slots=True)
class _Batch:
    """A JSON-RPC batch from the host: answered with one array once every request in it is."""

    waiting: set[Any] = field(default_factory=set)
    answers: list[Any] = field(default_factory=list)
    sealed: bool = False


class RelayBase:
    """The relay's state; see :class:`toolguard_mcp.relay.StdioRelay`."""

    server: asyncio.SubprocessTransport
    server_in: _io.Writer  # the server's stdin
    server_out: asyncio.ReadTransport  # reads the server's stdout
    server_done: asyncio.Future[None]  # the server closed its stdout (or reading it failed)
    host_writer: Any  # _io.Writer, or an HTTP session's writer

    def __init__(
        self,
        calls: CallGuard,
        command: Sequence[str],
        *,
        host_in: int,
        host_out: int,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        limit: int = LINE_LIMIT,
        probe: bool = True,
    ) -> None:
        self.calls = calls
        self.command = list(command)
        self.host_in, self.host_out = host_in, host_out
        self.timeout = timeout
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.limit = limit
        self.probe = probe
        self.session = calls.process_session  # one stdio connection: one MCP session
        self.client: str | None = None  # the host's clientInfo, from its initialize
        self.inflight: dict[Any, _Inflight] = {}
        # The host's tools/list requests: id -> (a first page: no cursor, the session).
        self.listing: dict[Any, tuple[bool, str | None]] = {}
        self.pages: dict[str | None, list[Any]] = {}  # a session's listing, page by page
        self.initializing: set[Any] = set()
        self.expired: set[Any] = set()  # calls answered here after a timeout
        self.batch_of: dict[Any, _Batch] = {}
        self.progress: dict[Any, Any] = {}  # progressToken -> the host's request id
        self.own: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._own_ids = itertools.count(1)
        # One timer for all calls' timeouts, at the earliest deadline, rather than one each:
        # every call has the same timeout, so the calls in flight are in deadline order.
        self._sweep: asyncio.TimerHandle | None = None
        self.tools_complete = False  # a whole tool list has been declared
        self.probing = False
        # The probe the host's next request runs first (stdio: :meth:`StdioRelay.run`): its
        # first request, or ("initialize") an initialize after the 2026-07-28 probe failed.
        self.probe_due: Literal["first", "initialize"] | None = None
        self.probe_exited = False  # the server exited during the proxy's own handshake
        self._started = False  # the server was started before the session (start_session)
        self.server_lines = wire.LineSplitter(limit)
        self._answered: list[dict[str, Any]] = []  # answers out, their bookkeeping not yet
        # Calls whose check runs in a thread (a shared store: relay_aside.py): id -> whether
        # the host cancelled it meanwhile.
        self.checking: dict[Any, bool] = {}
        self.stopped = False  # the relay is done: a check ending now cancels its call

    async def _request(
        self, method: str, params: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        rid = f"{wire.OWN_ID_PREFIX}{next(self._own_ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.own[rid] = future
        try:
            self._to_server(
                orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
                + b"\n"
            )
            # Bounded even without a call timeout: the host's call waits on this answer.
            answer = await asyncio.wait_for(future, timeout or self.timeout or _LIST_TIMEOUT)
        finally:
            self.own.pop(rid, None)
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise ServerError(error.get("code"), str(error.get("message", "")))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def _to_server(self, raw: bytes) -> None:
        self.server_in.write(raw)

    # Corking gathers the writes of one chunk's messages into one write per pipe; it is two
    # methods around a try/finally, not a context manager: it runs twice per call.
    def _cork(self) -> None:
        host = self.host_writer
        if isinstance(host, _io.Writer):
            host.cork()
        self.server_in.cork()

    def _uncork(self) -> None:
        self.server_in.uncork()
        host = self.host_writer
        if isinstance(host, _io.Writer):
            host.uncork()

    def _server_data(self, data: bytes) -> None:
        """A chunk of the server's stdout: every message in it routed, the host's answers
        written in one go, then the bookkeeping (closing the calls) for all of them."""
        try:
            self._cork()
            try:
                for line in self.server_lines.feed(data):
                    self._server_line(line)
            finally:
                self._uncork()
            self._bookkeeping()
        except Exception as exc:
            self._relay_failed(self.server_done, exc)

    def _server_end(self) -> None:
        try:
            last = self.server_lines.end()
            if last is not None:
                self._cork()
                try:
                    self._server_line(last)
                finally:
                    self._uncork()
                self._bookkeeping()
        except Exception as exc:
            self._relay_failed(self.server_done, exc)
        # The proxy's own requests (its handshake at start, a tool list) will not be answered:
        # failed now, not after their timeout (a server that dies at start is said at once).
        for future in self.own.values():
            if not future.done():
                future.set_exception(ServerExited(self.server.get_returncode()))
        if not self.server_done.done():
            self.server_done.set_result(None)

    def _bookkeeping(self) -> None:
        done, self._answered = self._answered, []
        for msg in done:
            self._after_answer(msg)

    def _relay_failed(self, done: asyncio.Future[None], exc: Exception) -> None:
        if not done.done():
            done.set_exception(exc)
        else:
            logger.error("toolguard-mcp-proxy: relay failed", exc_info=exc)

    def _server_line(self, line: bytes | wire.Oversized) -> None:
        if isinstance(line, wire.Oversized):
            self._oversized_answer(line)
            return
        if not line.endswith(b"\n"):
            line += b"\n"
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            if not self.probing:
                self.host_writer.write(line)
            return
        if isinstance(msg, list):
            items = [m for m in msg if isinstance(m, dict)]
            forward = [m for m in items if self._server_message(m, forward_now=False)]
            if forward:
                self.host_writer.write(orjson.dumps(forward) + b"\n")
                self._answered.extend(forward)
        elif isinstance(msg, dict):
            self._server_message(msg, line)
        elif not self.probing:
            self.host_writer.write(line)

    def _oversized_answer(self, line: wire.Oversized) -> None:
        """A server message past the limit: the request it answers gets an error instead."""
        logger.error(
            "toolguard-mcp-proxy: dropped a message of %d bytes from the server (the limit is "
            "%d: --max-message-mib)",
            line.size,
            self.limit,
        )
        rid = line.id
        if rid is None:
            return
        entry = self.inflight.pop(rid, None)
        if entry is not None:
            self._close_aside(entry.pending.fail, ServerError(None, "answer too large"))
        elif isinstance(rid, str) and rid in self.own:
            self.own[rid].set_exception(ServerError(None, "answer too large"))
            return
        self._answer(
            rid,
            {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {
                    "code": wire.INVALID_REQUEST,
                    "message": f"the server's answer of {line.size} bytes is over "
                    f"toolguard-mcp-proxy's limit of {self.limit} bytes (--max-message-mib)",
                },
            },
        )

    def _server_message(
        self, msg: dict[str, Any], raw: bytes | None = None, *, forward_now: bool = True
    ) -> bool:
        """Route one message from the server; True when it goes on to the host."""
        if "method" not in msg:  # a response
            rid = msg.get("id")
            if not wire.valid_id(rid):
                pass
            elif isinstance(rid, str) and rid in self.own:
                future = self.own[rid]
                if not future.done():
                    future.set_result(msg)
                return False
            elif rid in self.expired:
                self.expired.discard(rid)  # answered already, after the timeout
                return False
            elif rid in self.listing and self._filters():
                msg, raw = self._served_list(msg), None
            if forward_now:
                if self.calls.offload.on and rid in self.inflight:
                    relay_aside.answer(self, rid, msg, raw)  # after the call is closed
                    return True
                # The host is waiting for this answer: it goes out before the bookkeeping.
                self._answer(rid, msg, raw)
                self._answered.append(msg)
            return True
        if msg.get("method") == "notifications/tools/list_changed":
            self.tools_complete = False
            self.pages.clear()  # pages read before and after the change are not one list
        if self.probing:  # before the host's session: nobody to tell; a request is declined
            if "id" in msg:
                self._reply_server(msg["id"], METHOD_NOT_FOUND, "not during the proxy's start")
            return False
        if forward_now:
            self.host_writer.write(raw if raw is not None else orjson.dumps(msg) + b"\n")
        return True

    def _filters(self) -> bool:
        policy = self.calls.policy
        return policy is not None and (policy.allow is not None or bool(policy.deny))

    def _served_list(self, msg: dict[str, Any]) -> dict[str, Any]:
        result = msg.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return msg
        assert self.calls.policy is not None
        # The guard still learns the whole list (the host's answer is filtered, not the truth).
        self._after_answer(msg)
        served = {**result, "tools": self.calls.policy.served(result["tools"])}
        return {**msg, "result": served}

    def _after_answer(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        if not wire.valid_id(rid):
            return
        if self.progress:
            for token in [t for t, r in self.progress.items() if r == rid]:
                del self.progress[token]
        entry = self.inflight.pop(rid, None)
        if entry is not None:
            self._close_aside(self._close_call, entry, msg)
        elif rid in self.listing:
            first, session = self.listing.pop(rid)
            result = msg.get("result")
            if isinstance(result, dict) and isinstance(result.get("tools"), list):
                self._listed_page(result, first, session)

    def _close_call(self, entry: _Inflight, msg: dict[str, Any]) -> None:
        """Close an admitted call with the server's answer ``msg``."""
        error = msg.get("error")
        if error is None:
            self.calls.answered(entry.pending, msg.get("result") or {}, entry.params, entry.session)
            return
        error = error if isinstance(error, dict) else {}
        code = error.get("code")
        if refusals.refused_code(code):  # refused as a request: it never ran
            refusals.reject_code(entry.pending, code)
        else:
            entry.pending.fail(ServerError(code, str(error.get("message", ""))))

    def _close_aside(self, fn: Any, *args: Any) -> None:
        """``fn(*args)``, bookkeeping that may wait for a shared store: in a thread then
        (relay_aside.py), else now; a failure is logged, never raised."""
        if self.calls.offload.on:
            relay_aside.later(self, fn, *args)
        else:
            _safely(fn, *args)

    def _listed_page(self, result: dict[str, Any], first: bool, session: str | None) -> None:
        """A page of a host's tool list: its tools declared now; the list is whole at its last
        page when the host read it from the first (each page alone would leave the earlier
        pages' tools out of the pins and the contract's check)."""
        tools: list[Any] = result["tools"]
        if first:
            self.pages[session] = []
        pages = self.pages.get(session)
        if pages is not None:
            pages.extend(tools)
        if result.get("nextCursor"):
            _safely(self.calls.declare_tools, tools, complete=False)
            return
        self.pages.pop(session, None)
        if pages is None:  # a listing the proxy did not see begin: this page alone
            _safely(self.calls.declare_tools, tools, complete=False)
            return
        _safely(self.calls.declare_tools, pages, complete=True)
        self.tools_complete = True

    def _answer(self, rid: Any, msg: dict[str, Any], raw: bytes | None = None) -> None:
        """Send the answer to request ``rid``: alone, or into the array of its batch."""
        batch = self.batch_of.pop(rid, None) if wire.valid_id(rid) else None
        if batch is None:
            self.host_writer.write(raw if raw is not None else orjson.dumps(msg) + b"\n")
            return
        batch.waiting.discard(rid)
        batch.answers.append(msg)
        self._flush(batch)

    def _flush(self, batch: _Batch) -> None:
        if batch.sealed and not batch.waiting and batch.answers:
            self.host_writer.write(orjson.dumps(batch.answers) + b"\n")
            batch.answers = []

    def _reply_server(self, rid: Any, code: int, message: str) -> None:
        error = {"code": code, "message": message}
        self._to_server(orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + b"\n")

    def _write_host(self, message: dict[str, Any]) -> None:
        self.host_writer.write(orjson.dumps(message) + b"\n")


# -- helpers -----------------------------------------------------------------------------------
def _progress_token(params: Any) -> Any:
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if wire.valid_id(token) else None
