"""The stdio proxy: a JSON-RPC relay between the host and the server it runs as a subprocess.

Every message passes through (initialization, tool lists, resources, prompts, notifications,
requests from the server to the host), so the host negotiates with the server itself and sees
what it offers, less the tools the contract denies. Host messages are parsed strictly first
(:mod:`toolguard_mcp.wire`): what cannot be parsed and checked is answered here with a
JSON-RPC error and never forwarded, and what is forwarded is what was checked. ``tools/call``
requests are checked before they go on (a blocked one is answered here, with ``isError`` and
the guard's message) and closed with the server's answer. Relaying lines instead of running
a second MCP session keeps the added latency to a parse per message (adapters/mcp/bench.py).

At start the proxy asks the server for its tool list itself (an ``initialize`` of its own),
so a contract that does not fit the server's tools stops it before the host is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from typing import Any

import orjson
import toolguard as tg

from . import _child, _io, _meta, wire
from .relay_base import (
    _LIST_TIMEOUT,
    _MAX_EXPIRED,
    _STOP_GRACE,
    CONNECTION_CLOSED,
    LINE_LIMIT,
    PROBE_VERSION,
    RelayBase,
    ServerError,
    ServerExited,
    _Batch,
    _cancel_timer,
    _Inflight,
    _progress_token,
    _safely,
)
from .results import error_result

__all__ = ["LINE_LIMIT", "ServerError", "ServerExited", "StdioRelay"]

logger = logging.getLogger("toolguard.mcp")


class StdioRelay(RelayBase):
    """Relays between the host on ``host_in`` / ``host_out`` (file descriptors) and
    ``command``, checking ``tools/call`` with ``calls``. ``timeout``: seconds a tool call
    may take before the proxy cancels it (None: no limit). ``limit``: the largest message
    in bytes; a longer one is refused with an error (never cut, never a crash)."""

    async def run(self) -> int:
        """Relay until the host or the server closes; returns the proxy's exit status. A
        contract that does not fit the server's tools raises :class:`tg.ContractFileError`."""
        self.host_writer = await _io.open_writer(self.host_out)
        # Read only once the probe is done: the host's messages wait in the pipe till then.
        self.host_reader = await _io.open_reader(self.host_in, self.limit)
        return await self._serve(self._from_host, probe=self.probe, signals=True)

    async def run_session(self, lines: AsyncIterator[bytes], writer: Any) -> int:
        """Relay one host session of another transport: ``lines`` are its messages as JSON
        text, ``writer`` takes the answers (``write(bytes)``, ``drain()``, ``close()``)."""
        self.host_writer = writer
        return await self._serve(lambda: self._from_lines(lines), probe=False, signals=False)

    async def probe_only(self) -> bool:
        """Start the server, declare its tools (a contract error raises), stop it; False when
        the server could not be started."""
        self.host_writer = _io.Writer(-1, None, discard=True)
        if not await self._spawn():
            return False
        from_server = asyncio.create_task(self._from_server())
        try:
            await self._probe()
        finally:
            from_server.cancel()
            await self._stop_server()
        return True

    async def _spawn(self) -> bool:
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                limit=self.limit,
                **_child.spawn_options(),
            )
        except OSError as exc:
            logger.error("toolguard-mcp-proxy: cannot start %s: %s", self.command[0], exc)
            return False
        return True

    async def _serve(
        self, host: Callable[[], Coroutine[Any, Any, None]], *, probe: bool, signals: bool
    ) -> int:
        loop = asyncio.get_running_loop()
        if not await self._spawn():
            return 127
        from_server = asyncio.create_task(self._from_server())
        try:
            if probe:
                await self._probe()
        except BaseException:
            from_server.cancel()
            await self._stop_server()
            raise
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT) if signals else ():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
        from_host = asyncio.create_task(host())
        stopped = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait(
                {from_host, from_server, stopped}, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:  # the session was ended from outside (HTTP)
            done = set()
        failed = False
        for task in done:
            if task is not stopped and not task.cancelled() and task.exception() is not None:
                failed = True
                logger.error("toolguard-mcp-proxy: relay failed", exc_info=task.exception())
        if from_server in done and not failed:
            code = await _io.exit_code(self.proc, _STOP_GRACE)
            if code is None:  # closed its stdout but lives on
                code = await self._stop_server()
            self._server_exited(code)
            status = code if code else 0
            if status < 0:  # killed by a signal, as a shell reports it
                status = 128 - status
        else:
            from_host.cancel()
            await self._stop_server()
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(from_server, _STOP_GRACE)
            for entry in self.inflight.values():
                _cancel_timer(entry)
                entry.pending.cancel()  # the host left without waiting for the answer
            self.inflight.clear()
            status = 1 if failed else 0
        for task in (from_host, from_server, stopped):
            task.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT) if signals else ():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
        await self.host_writer.close()
        return status

    async def _probe(self) -> None:
        """The proxy's own handshake and tool list, before the host is served: every tool is
        declared (a contract error raises here) and the host's own initialize follows."""
        self.probing = True
        try:
            await self._request(
                "initialize",
                timeout=_LIST_TIMEOUT,
                params={
                    "protocolVersion": PROBE_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "toolguard-mcp-proxy", "version": "0"},
                },
            )
            await self._to_server(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            await self._list_tools(None, at_start=True, timeout=_LIST_TIMEOUT)
        except (TimeoutError, ServerError, ServerExited) as exc:
            logger.warning(
                "toolguard-mcp-proxy: the server did not answer the proxy's own initialize "
                "(%s); its tools are declared from the host's first tool list instead",
                exc or type(exc).__name__,
            )
        finally:
            self.probing = False

    async def _stop_server(self) -> int | None:
        proc = self.proc
        if proc.returncode is None and proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        code = await _io.exit_code(proc, _STOP_GRACE)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if code is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            code = await _io.exit_code(proc, _STOP_GRACE)
        return code

    def _server_exited(self, code: int | None) -> None:
        in_flight = list(self.inflight.items())
        self.inflight.clear()
        for rid, entry in in_flight:
            _cancel_timer(entry)
            _safely(entry.pending.fail, ServerExited(code))
            self._answer(
                rid,
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {
                        "code": CONNECTION_CLOSED,
                        "message": f"the MCP server behind toolguard-mcp-proxy exited "
                        f"(code {code}) before answering tools/call {entry.name}",
                    },
                },
            )
        for fut in self.own.values():
            if not fut.done():
                fut.set_exception(ServerExited(code))
        logger.error(
            "toolguard-mcp-proxy: the MCP server exited with code %s; %d tools/call in flight "
            "answered with an error",
            code,
            len(in_flight),
        )

    async def _from_host(self) -> None:
        while True:
            line = await wire.read_line(self.host_reader)
            if isinstance(line, wire.Oversized):
                logger.warning(
                    "toolguard-mcp-proxy: refused a message of %d bytes from the host (the "
                    "limit is %d: --max-message-mib)",
                    line.size,
                    self.limit,
                )
                await self._refuse(
                    wire.Refusal(
                        wire.INVALID_REQUEST,
                        f"Invalid Request: a message of {line.size} bytes is over "
                        f"toolguard-mcp-proxy's limit of {self.limit} bytes",
                        line.id,
                    )
                )
                continue
            if not line:
                return
            await self._host_line(line)

    async def _from_lines(self, lines: AsyncIterator[bytes]) -> None:
        async for line in lines:
            await self._host_line(line)

    async def _host_line(self, line: bytes) -> None:
        if not line.strip():
            return
        msg = wire.parse(line)
        if isinstance(msg, wire.Refusal):
            await self._refuse(msg)
        elif isinstance(msg, list):
            await self._host_batch(msg)
        else:
            await self._host_message(msg)

    async def _host_batch(self, items: list[Any]) -> None:
        """A JSON-RPC batch (MCP 2025-03-26): each message checked and relayed on its own, the
        answers sent back as one array, as JSON-RPC 2.0 says; ``[]`` is an invalid request."""
        if not items:
            await self._refuse(wire.Refusal(wire.INVALID_REQUEST, "Invalid Request: empty batch"))
            return
        batch = _Batch()
        for item in items:
            await self._host_message(item, batch)
        batch.sealed = True
        self._flush(batch)
        await self.host_writer.drain()

    async def _host_message(self, msg: Any, batch: _Batch | None = None) -> None:
        refusal = wire.check(msg)
        if refusal is not None:
            await self._refuse(refusal, batch)
            return
        method = msg.get("method")
        params = msg.get("params")
        if "id" in msg and method is not None:
            rid = msg["id"]
            if batch is not None:
                self.batch_of[rid] = batch
                batch.waiting.add(rid)
            token = _progress_token(params)
            if token is not None:
                self.progress[token] = rid
            if method == "tools/call":
                await self._tools_call(rid, params, msg)
                return
            if method == "tools/list":
                self.listing.add(rid)
            elif method == "initialize":
                self._note_client(params)
        elif method == "notifications/cancelled" and isinstance(params, dict):
            rid = params.get("requestId")
            entry = self.inflight.pop(rid, None) if wire.valid_id(rid) else None
            if entry is not None:
                _cancel_timer(entry)
                _safely(entry.pending.cancel)
        await self._to_server(orjson.dumps(msg) + b"\n")

    async def _refuse(self, refusal: wire.Refusal, batch: _Batch | None = None) -> None:
        if refusal.call is not None:
            name, meta = refusal.call
            _safely(self.calls.record_refusal, name, refusal.message, meta, self.session)
        if batch is not None:
            batch.answers.append(refusal.answer())
            return
        self._write_host(refusal.answer())
        await self.host_writer.drain()

    def _note_client(self, params: Any) -> None:
        info = params.get("clientInfo") if isinstance(params, dict) else None
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            version = info.get("version")
            who = info["name"] + (f"/{version}" if isinstance(version, str) else "")
            self.client = who[:256]

    async def _tools_call(self, rid: Any, params: dict[str, Any], msg: dict[str, Any]) -> None:
        name = params["name"]
        meta = params.get("_meta")
        if not self.calls.knows(name) and not self.tools_complete:
            await self._list_tools(meta)
        with _trace_parent(meta):
            pending = self.calls.admit(
                name, params.get("arguments"), meta, self.session, client=self.client
            )
        rejection = pending if isinstance(pending, tg.Rejection) else pending.rejection
        if rejection is not None:
            self._answer(rid, {"jsonrpc": "2.0", "id": rid, "result": error_result(str(rejection))})
            await self.host_writer.drain()
            return
        timer = None
        if self.timeout is not None:
            timer = asyncio.get_running_loop().call_later(self.timeout, self._expire, rid)
        old = self.inflight.pop(rid, None)
        if old is not None:  # the host reused an id still in flight
            _cancel_timer(old)
            _safely(old.pending.cancel)
        assert isinstance(pending, tg.PendingCall)
        self.inflight[rid] = _Inflight(pending, name, timer)
        await self._to_server(orjson.dumps(msg) + b"\n")

    def _expire(self, rid: Any) -> None:
        entry = self.inflight.pop(rid, None)
        if entry is None:
            return
        _safely(entry.pending.cancel)
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
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(orjson.dumps(notice) + b"\n")

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

    token = context.attach(propagate.extract(meta))
    try:
        yield
    finally:
        context.detach(token)
