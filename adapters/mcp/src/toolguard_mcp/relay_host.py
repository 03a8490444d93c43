"""The stdio relay's handling of what the host sends: each message parsed strictly and checked
(:mod:`toolguard_mcp.wire`), ``tools/call`` admitted by the guard before it is forwarded (or
answered here with the refusal), batches answered as one array, and the server's tool list
read first when a call names a tool the guard does not know yet, or by the proxy's own probe
before the host's first request.
:class:`toolguard_mcp.relay.StdioRelay` adds the reading, the run and the server's process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any

import orjson
import toolguard as tg

from . import _meta, relay_aside, wire
from .relay_base import (
    _LIST_TIMEOUT,
    _MAX_EXPIRED,
    PROBE_VERSION,
    Era,
    RelayBase,
    ServerError,
    ServerExited,
    _Batch,
    _Inflight,
    _progress_token,
)
from .results import error_result
from .rounds import is_retry

logger = logging.getLogger("toolguard.mcp")


class HostSide(RelayBase):
    """The host's messages, one by one; see :class:`toolguard_mcp.relay.StdioRelay`."""

    # The handlers below return None when the message is dealt with, or the coroutine that
    # finishes it once the server has answered the proxy (the tool list a call needs first).
    def _host_line(self, line: bytes) -> Coroutine[Any, Any, None] | None:
        if not line.strip():
            return None
        msg = wire.parse(line)
        if isinstance(msg, wire.Refusal):
            self._refuse(msg)
            return None
        if isinstance(msg, list):
            return self._host_batch(msg)
        return self._host_message(msg)

    def _host_batch(self, items: list[Any]) -> Coroutine[Any, Any, None] | None:
        """A JSON-RPC batch (MCP 2025-03-26): each message checked and relayed on its own, the
        answers sent back as one array, as JSON-RPC 2.0 says; ``[]`` is an invalid request."""
        if not items:
            self._refuse(wire.Refusal(wire.INVALID_REQUEST, "Invalid Request: empty batch"))
            return None
        batch = _Batch()
        for i, item in enumerate(items):
            later = self._host_message(item, batch)
            if later is not None:
                return self._batch_rest(later, items[i + 1 :], batch)
        self._seal(batch)
        return None

    async def _batch_rest(
        self, later: Coroutine[Any, Any, None], rest: list[Any], batch: _Batch
    ) -> None:
        await later
        for item in rest:
            more = self._host_message(item, batch)
            if more is not None:
                await more
        self._seal(batch)

    def _seal(self, batch: _Batch) -> None:
        batch.sealed = True
        self._flush(batch)

    def _host_message(
        self, msg: Any, batch: _Batch | None = None
    ) -> Coroutine[Any, Any, None] | None:
        refusal = wire.check(msg)
        if refusal is not None:
            self._refuse(refusal, batch)
            return None
        method = msg.get("method")
        params = msg.get("params")
        if self.probe_due is not None and "id" in msg and method is not None:
            era = self._probe_era(method, params)
            if era is not None:
                return self._probe_first(era, msg, batch)
        if "id" in msg and method is not None:
            rid = msg["id"]
            if batch is not None:
                self.batch_of[rid] = batch
                batch.waiting.add(rid)
            token = _progress_token(params)
            if token is not None:
                self.progress[token] = rid
            if method == "tools/call":
                return self._tools_call(rid, params, msg)
            if self.expired:
                self._reused(rid)
            if method == "tools/list":
                cursor = params.get("cursor") if isinstance(params, dict) else None
                self.listing[rid] = (cursor is None, self.session)
            elif method == "initialize":
                self._note_client(params)
        elif method == "notifications/cancelled" and isinstance(params, dict):
            rid = params.get("requestId")
            entry = self.inflight.pop(rid, None) if wire.valid_id(rid) else None
            if entry is not None:
                self._close_aside(entry.pending.cancel)
            elif rid in self.checking:  # cancelled while its check runs in a thread
                self.checking[rid] = True
        self._to_server(orjson.dumps(msg) + b"\n")
        return None

    # -- the proxy's own tool list, before the host's first request ---------------------------
    def _probe_era(self, method: str, params: Any) -> Era | None:
        """The era of the probe the host's request calls for, None when it calls for none. As
        MCP servers choose (mcp.server.runner.serve_dual_era_loop): a request carrying the
        2026-07-28 envelope opens that era, anything else the handshake."""
        modern = method != "initialize" and _meta.enveloped(params)
        if self.probe_due == "first":
            return "2026-07-28" if modern else "handshake"
        # The 2026-07-28 probe failed (a server of the handshake era only): a host falling
        # back to the handshake has its initialize probed.
        return "handshake" if method == "initialize" else None

    async def _probe_first(self, era: Era, msg: dict[str, Any], batch: _Batch | None) -> None:
        """Declare the server's tools in the host's era, then relay the host's request."""
        self.probe_due = None
        if era == "handshake":
            await self._probe()
        else:
            self.probing = True
            try:
                # No handshake to pin in this era: each request carries the envelope, so the
                # proxy's list reuses the host's.
                meta = msg["params"].get("_meta")
                if not await self._list_tools(meta, at_start=True, timeout=_LIST_TIMEOUT):
                    self.probe_due = "initialize"
            finally:
                self.probing = False
        self._cork()
        try:
            later = self._host_message(msg, batch)
        finally:
            self._uncork()
        if later is not None:
            await later

    async def _probe(self) -> None:
        """The proxy's own handshake and tool list, before the host's own ``initialize``: every
        tool is declared (a contract error raises here) and the host's handshake follows."""
        self.probing = True
        try:
            await self._handshake(PROBE_VERSION)
        except ServerExited:
            self.probe_exited = True  # the run that follows says so, with the exit code
        except (TimeoutError, ServerError) as exc:
            logger.warning(
                "toolguard-mcp-proxy: the server did not answer the proxy's own initialize "
                "(%s); its tools are declared from the host's first tool list instead",
                exc or type(exc).__name__,
            )
        finally:
            self.probing = False

    async def _handshake(self, version: str) -> Any:
        """The proxy's own ``initialize`` (answered: its result), ``initialized`` and the
        first tool list, which declares every tool. The caller sets ``probing``."""
        result = await self._request(
            "initialize",
            timeout=_LIST_TIMEOUT,
            params={
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "toolguard-mcp-proxy", "version": "0"},
            },
        )
        self._to_server(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        await self._list_tools(None, at_start=True, timeout=_LIST_TIMEOUT)
        return result

    def _refuse(self, refusal: wire.Refusal, batch: _Batch | None = None) -> None:
        if refusal.call is not None:
            name, meta = refusal.call
            self._close_aside(self.calls.record_refusal, name, refusal.message, meta, self.session)
        if batch is not None:
            batch.answers.append(refusal.answer())
            return
        self._write_host(refusal.answer())

    def _note_client(self, params: Any) -> None:
        info = params.get("clientInfo") if isinstance(params, dict) else None
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            version = info.get("version")
            who = info["name"] + (f"/{version}" if isinstance(version, str) else "")
            self.client = who[:256]

    def _tools_call(
        self, rid: Any, params: dict[str, Any], msg: dict[str, Any]
    ) -> Coroutine[Any, Any, None] | None:
        name = params["name"]
        if not self.calls.knows(name) and not self.tools_complete:
            return self._tools_call_listed(rid, params, msg)
        self._admit(rid, params, msg)
        return None

    async def _tools_call_listed(
        self, rid: Any, params: dict[str, Any], msg: dict[str, Any]
    ) -> None:
        """A call of a tool the guard does not know yet: the server's tool list read first."""
        await self._list_tools(params.get("_meta"))
        self._cork()
        try:
            self._admit(rid, params, msg)
        finally:
            self._uncork()

    def _admit(self, rid: Any, params: dict[str, Any], msg: dict[str, Any]) -> None:
        """Check the call; forward it (the message as parsed) or answer the refusal. With a
        shared store the check runs in a thread, the messages after it going on meanwhile."""
        if self.calls.offload.on:
            relay_aside.admit(self, rid, params, msg)
            return
        self._admitted(rid, params, msg, self._check(params, self.session, self.client))

    def _check(
        self, params: dict[str, Any], session: str | None, client: str | None
    ) -> tg.PendingCall | tg.Rejection:
        name = params["name"]
        meta = params.get("_meta")
        retry = is_retry(params)
        if isinstance(meta, Mapping) and "traceparent" in meta:
            with _trace_parent(meta):
                return self.calls.admit(
                    name, params.get("arguments"), meta, session, client=client, retry=retry
                )
        return self.calls.admit(
            name, params.get("arguments"), meta, session, client=client, retry=retry
        )

    def _admitted(
        self,
        rid: Any,
        params: dict[str, Any],
        msg: dict[str, Any],
        pending: tg.PendingCall | tg.Rejection,
        session: str | None = None,
    ) -> None:
        """Forward a checked call, or answer its refusal."""
        name = params["name"]
        rejection = pending if isinstance(pending, tg.Rejection) else pending.rejection
        if rejection is not None:
            self._answer(rid, {"jsonrpc": "2.0", "id": rid, "result": error_result(str(rejection))})
            return
        deadline = None
        if self.timeout is not None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.timeout
            if self._sweep is None:
                self._sweep = loop.call_at(deadline, self._expire_due)
        old = self.inflight.pop(rid, None)
        if old is not None:  # the host reused an id still in flight
            self._close_aside(old.pending.cancel)
        if self.expired:
            self._reused(rid)
        assert isinstance(pending, tg.PendingCall)
        self.inflight[rid] = _Inflight(pending, name, deadline, params, session or self.session)
        self._to_server(orjson.dumps(msg) + b"\n")

    def _expire_due(self) -> None:
        """Time out the calls whose deadline has come (the oldest first: they are in order),
        and set the timer again for the next one."""
        self._sweep = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self.inflight:
            rid, entry = next(iter(self.inflight.items()))
            if entry.deadline is None:
                return
            if entry.deadline > now:
                self._sweep = loop.call_at(entry.deadline, self._expire_due)
                return
            self._expire(rid)

    def _reused(self, rid: Any) -> None:
        """A request going to the server under the id of a call that timed out: an answer
        with that id is now this request's (MCP forbids reusing an id; a host that does would
        otherwise never get its answer, dropped as the late answer of the expired call)."""
        self.expired.discard(rid)

    def _expire(self, rid: Any) -> None:
        entry = self.inflight.pop(rid, None)
        if entry is None:
            return
        self._close_aside(entry.pending.cancel)
        if len(self.expired) >= _MAX_EXPIRED:
            self.expired.clear()
        self.expired.add(rid)
        self._answer(
            rid,
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": error_result(
                    f"The tool `{entry.name}` did not answer within {self.timeout:g} s; "
                    "toolguard-mcp-proxy cancelled the call."
                ),
            },
        )
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": rid, "reason": f"timed out after {self.timeout:g} s"},
        }
        self._to_server(orjson.dumps(notice) + b"\n")

    async def _list_tools(
        self, meta: Any, *, at_start: bool = False, timeout: float | None = None
    ) -> bool:
        """Make sure the server's whole tool list is declared; False when it cannot be read."""
        if self.tools_complete:
            return True
        # On a 2026-07-28 connection every request carries the envelope: reuse the host's.
        envelope = (
            {k: v for k, v in meta.items() if k.startswith(_meta.RESERVED_PREFIX)}
            if isinstance(meta, Mapping)
            else {}
        )
        tools: list[Any] = []
        cursor = None
        try:
            while True:
                params: dict[str, Any] = {"_meta": envelope} if envelope else {}
                if cursor:
                    params["cursor"] = cursor
                page = await self._request("tools/list", params, timeout=timeout)
                tools.extend(page.get("tools") or ())
                cursor = page.get("nextCursor")
                if not cursor:
                    break
        except Exception as exc:
            logger.warning(
                "toolguard-mcp-proxy: could not read the server's tool list (%s); tools not "
                "listed yet are blocked",
                exc,
            )
            return False
        self.calls.declare_tools(tools, at_start=at_start)
        self.tools_complete = True
        return True


@contextlib.contextmanager
def _trace_parent(meta: Any) -> Iterator[None]:
    """The host's W3C trace context (``_meta.traceparent``, SEP-414) as the call span's parent."""
    if not isinstance(meta, Mapping) or "traceparent" not in meta:
        yield
        return
    from opentelemetry import context, propagate

    # Only text is a trace context: a host's `"traceparent": 5` (or tracestate, baggage)
    # made the propagator raise out of the relay, ending every call of the connection.
    carrier = {k: v for k, v in meta.items() if k in _TRACE_KEYS and isinstance(v, str)}
    try:
        parent = propagate.extract(carrier)
    except Exception:  # telemetry trouble never breaks a call: no parent, then
        logger.debug("toolguard: the host's trace context could not be read", exc_info=True)
        yield
        return
    token = context.attach(parent)
    try:
        yield
    finally:
        context.detach(token)


_TRACE_KEYS = frozenset({"traceparent", "tracestate", "baggage"})
