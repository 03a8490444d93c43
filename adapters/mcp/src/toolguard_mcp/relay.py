"""The stdio proxy: a JSON-RPC relay between the host and the server it runs as a subprocess.

Every message passes through (initialization, tool lists, resources, prompts, notifications,
requests from the server to the host), so the host negotiates with the server itself and sees
what it offers, less the tools the contract denies. Host messages are parsed strictly first
(:mod:`toolguard_mcp.wire`): what cannot be parsed and checked is answered here with a
JSON-RPC error and never forwarded, and what is forwarded is what was checked. ``tools/call``
requests are checked before they go on (a blocked one is answered here, with ``isError`` and
the guard's message) and closed with the server's answer. Relaying lines instead of running
a second MCP session keeps the added latency to a parse per message; and each chunk read from
a pipe is handled in the event loop's callback that read it (no task woken per message), the
answers to one chunk go out in one write, and a call's bookkeeping runs once its answer is out
(adapters/mcp/bench.py measures what is left).

Before the host's first request goes on, the proxy asks the server for its tool list itself,
in the protocol era that request opens (:meth:`HostSide._probe_first`), so a contract that
does not fit the server's tools stops it before the host is served.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import toolguard as tg

from . import _child, _io, wire
from .relay_base import (
    _STOP_GRACE,
    CONNECTION_CLOSED,
    LINE_LIMIT,
    ServerError,
    ServerExited,
)
from .relay_host import HostSide

__all__ = ["LINE_LIMIT", "ServerError", "ServerExited", "StdioRelay"]

logger = logging.getLogger("toolguard.mcp")


class StdioRelay(HostSide):
    """Relays between the host on ``host_in`` / ``host_out`` (file descriptors) and
    ``command``, checking ``tools/call`` with ``calls``. ``timeout``: seconds a tool call
    may take before the proxy cancels it (None: no limit). ``limit``: the largest message
    in bytes; a longer one is refused with an error (never cut, never a crash)."""

    async def run(self) -> int:
        """Relay until the host or the server closes; returns the proxy's exit status. A
        contract that does not fit the server's tools raises :class:`tg.ContractFileError`."""
        self.host_writer = await _io.open_writer(self.host_out)
        # The probe waits for the host's first request: on one stdio connection the first
        # request fixes the server's protocol era, so a probe of its own before the host
        # speaks would shut a 2026-07-28 host out.
        self.probe_due = "first" if self.probe else None
        return await self._serve(self._from_host, probe=False, signals=True)

    async def start_session(self, writer: Any) -> bool:
        """Start the server for one host session of another transport (before the session
        is opened, so a server that cannot be started is said at once); False when it could
        not be. ``writer`` takes the answers (``write(bytes)``, ``drain()``, ``close()``, and
        optionally ``server_exited(code)``: told after the calls in flight were answered, so
        it can answer the session's other requests in flight)."""
        self.host_writer = writer
        self._started = await self._spawn()
        return self._started

    async def run_session(self, lines: AsyncIterator[bytes], writer: Any) -> int:
        """Relay one host session of another transport: ``lines`` are its messages as JSON
        text, ``writer`` takes the answers (see :meth:`start_session`, which may have
        started the server already)."""
        self.host_writer = writer
        return await self._serve(
            lambda: self._from_lines(lines),
            probe=False,
            signals=False,
            spawned=self._started,
        )

    async def probe_only(self) -> int | None:
        """Start the server, declare its tools (a contract error raises), stop it. None when
        done, else the exit status: 127 when the server could not be started, its own code
        (at least 1) when it exited before the proxy had its tool list."""
        self.host_writer = _io.Writer(None, discard=True)
        if not await self._spawn():
            return 127
        try:
            await self._probe()
            if self.probe_exited:
                code = await _io.exit_code(self.server, _STOP_GRACE)
                logger.error("toolguard-mcp-proxy: the MCP server exited at start (code %s)", code)
                return code if code and code > 0 else 1
        finally:
            await self._stop_server()
            self._release_pipes()
        return None

    async def _spawn(self) -> bool:
        self.server_done = asyncio.get_running_loop().create_future()
        try:
            self.server, self.server_in, self.server_out = await _io.spawn(
                self.command,
                self._server_data,
                self._server_end,
                env=self.env,
                cwd=self.cwd,
                options=_child.spawn_options(),
            )
        except OSError as exc:
            logger.error("toolguard-mcp-proxy: cannot start %s: %s", self.command[0], exc)
            return False
        self.server_in.on_change = self._flow
        if isinstance(self.host_writer, _io.Writer):
            self.host_writer.on_change = self._flow
        return True

    def _flow(self) -> None:
        """A full pipe stops the reading of what would fill it: the server's output while the
        host does not read its answers; the host's messages while the server does not read
        them, or the host its answers."""
        host_full = isinstance(self.host_writer, _io.Writer) and self.host_writer.full
        stdout = self.server_out
        if not stdout.is_closing():
            if host_full:
                stdout.pause_reading()
            else:
                stdout.resume_reading()
        self._pause_host(host_full or self.server_in.full)

    async def _from_server(self) -> None:
        await asyncio.shield(self.server_done)

    async def _serve(
        self,
        host: Callable[[], Coroutine[Any, Any, None]],
        *,
        probe: bool,
        signals: bool,
        spawned: bool = False,
    ) -> int:
        loop = asyncio.get_running_loop()
        if not spawned and not await self._spawn():
            return 127
        try:
            if probe:
                await self._probe()
        except BaseException:
            await self._stop_server()
            self._release_pipes()
            raise
        from_server = asyncio.create_task(self._from_server())
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
        self.stopped = True
        failed = False
        unfit: tg.ContractFileError | None = None  # found by the probe the host's request ran
        for task in done:
            if task is not stopped and not task.cancelled() and task.exception() is not None:
                failed = True
                exc = task.exception()
                if isinstance(exc, tg.ContractFileError):
                    unfit = exc
                else:
                    logger.error("toolguard-mcp-proxy: relay failed", exc_info=exc)
        if from_server in done and not failed:
            code = await _io.exit_code(self.server, _STOP_GRACE)
            if code is None:  # closed its stdout but lives on
                code = await self._stop_server()
            self._server_exited(code)
            self._release_pipes()
            status = code if code else 0
            if status < 0:  # killed by a signal, as a shell reports it
                status = 128 - status
        else:
            from_host.cancel()
            self._stop_host()
            await self._stop_server()
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(from_server, _STOP_GRACE)
            self._release_pipes()
            for entry in self.inflight.values():
                self._close_aside(entry.pending.cancel)  # the host left without its answer
            self.inflight.clear()
            status = 1 if failed else 0
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for task in (from_host, from_server, stopped):
            task.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT) if signals else ():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
        await self.host_writer.close()
        if unfit is not None:
            raise unfit
        return status

    async def _stop_server(self) -> int | None:
        server = self.server
        if server.get_returncode() is None and self.server_in.transport is not None:
            with contextlib.suppress(Exception):
                self.server_in.transport.close()  # what is buffered is written first
        code = await _io.exit_code(server, _STOP_GRACE)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if code is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(server.get_pid(), sig)
            code = await _io.exit_code(server, _STOP_GRACE)
        return code

    def _release_pipes(self) -> None:
        """Close the relay's ends of the server's pipes (a grandchild that inherited them may
        hold them open after the server is gone)."""
        for transport in (self.server_out, self.server_in.transport):
            if transport is not None and not transport.is_closing():
                transport.close()

    def _server_exited(self, code: int | None) -> None:
        in_flight = list(self.inflight.items())
        self.inflight.clear()
        for rid, entry in in_flight:
            self._close_aside(entry.pending.fail, ServerExited(code))
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
        told = getattr(self.host_writer, "server_exited", None)
        if told is not None:  # an HTTP session: its other requests in flight get an error too
            told(code)
        logger.error(
            "toolguard-mcp-proxy: the MCP server exited with code %s; %d tools/call in flight "
            "answered with an error",
            code,
            len(in_flight),
        )

    # -- the host's side ---------------------------------------------------------------------
    async def _from_host(self) -> None:
        """Read the host's stdin until it ends (each chunk handled in the loop's callback)."""
        loop = asyncio.get_running_loop()
        self.host_done = loop.create_future()
        self.host_lines = wire.LineSplitter(self.limit)
        self.host_queue: collections.deque[bytes | wire.Oversized] = collections.deque()
        self.host_waiting: asyncio.Task[None] | None = None  # a message awaiting the server
        self.host_ended = False
        self.host_reader = await _io.open_reader(self.host_in, self._host_data, self._host_end)
        await asyncio.shield(self.host_done)

    async def _from_lines(self, lines: AsyncIterator[bytes]) -> None:
        async for line in lines:
            later = self._host_line(line)
            if later is not None:
                await later
            await self.host_writer.drain()

    def _stop_host(self) -> None:
        """Relay no more of the host's messages (the proxy is stopping)."""
        done = getattr(self, "host_done", None)
        if done is not None and not done.done():
            done.set_result(None)
        self._pause_host(True)

    def _pause_host(self, pause: bool) -> None:
        done = getattr(self, "host_done", None)
        pause = pause or (done is not None and done.done())
        reader = getattr(self, "host_reader", None)
        if reader is not None and not reader.is_closing():
            if pause:
                reader.pause_reading()
            else:
                reader.resume_reading()

    def _host_data(self, data: bytes) -> None:
        self.host_queue.extend(self.host_lines.feed(data))
        self._host_pump()

    def _host_end(self) -> None:
        last = self.host_lines.end()
        if last is not None:
            self.host_queue.append(last)
        self.host_ended = True
        self._host_pump()

    def _host_pump(self) -> None:
        """Handle the host's messages in order, each at once unless it must wait for the
        server (a call of a tool not listed yet): the messages after it wait their turn."""
        if self.host_waiting is not None or self.host_done.done():
            return
        try:
            # The requests of one chunk go to the server in one write once all are checked:
            # with 50 calls in flight from the mcp client this gave 83-88% of direct against
            # 73-80% written one by one (bench.py's throughput, side by side in one run).
            self._cork()
            try:
                while self.host_queue:
                    later = self._host_item(self.host_queue.popleft())
                    if later is not None:
                        self.host_waiting = asyncio.create_task(self._host_resume(later))
                        return
            finally:
                self._uncork()
        except Exception as exc:
            self._relay_failed(self.host_done, exc)
            return
        if self.host_ended:
            self.host_done.set_result(None)

    async def _host_resume(self, later: Coroutine[Any, Any, None]) -> None:
        try:
            await later
        except Exception as exc:
            self._relay_failed(self.host_done, exc)
            return
        finally:
            self.host_waiting = None
        self._host_pump()

    def _host_item(self, line: bytes | wire.Oversized) -> Coroutine[Any, Any, None] | None:
        if isinstance(line, wire.Oversized):
            logger.warning(
                "toolguard-mcp-proxy: refused a message of %d bytes from the host (the "
                "limit is %d: --max-message-mib)",
                line.size,
                self.limit,
            )
            self._refuse(
                wire.Refusal(
                    wire.INVALID_REQUEST,
                    f"Invalid Request: a message of {line.size} bytes is over "
                    f"toolguard-mcp-proxy's limit of {self.limit} bytes",
                    line.id,
                )
            )
            return None
        return self._host_line(line)
