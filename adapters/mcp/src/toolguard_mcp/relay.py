"""The stdio proxy: a JSON-RPC relay between the host and the server it runs as a subprocess.

Every line passes through unchanged (initialization, tool lists, resources, prompts,
notifications, requests from the server to the host), so the host negotiates with the server
itself and sees exactly what it offers. Only ``tools/call`` requests are read: checked before
they are forwarded (a blocked one is answered here, with ``isError`` and the guard's message)
and closed with the server's answer. Relaying raw lines instead of running a second MCP
session keeps the added latency to one parse per message (adapters/mcp/bench.py).

The guard learns the server's tools from the tool lists the host asks for, or asks the
server itself the first time a call names a tool it has not seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import toolguard as tg

from . import _meta
from .calls import CallGuard
from .results import error_result

logger = logging.getLogger("toolguard.mcp")

LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message; tool lists and results can be large
CONNECTION_CLOSED = -32000  # mcp.types.CONNECTION_CLOSED, without importing the SDK
_STOP_GRACE = 2.0  # the MCP shutdown sequence: close stdin, wait, SIGTERM, wait, SIGKILL
_MAX_EXPIRED = 10_000
_LIST_TIMEOUT = 60.0


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
    timer: asyncio.TimerHandle | None


class StdioRelay:
    """Relays between the host on ``host_in`` / ``host_out`` (file descriptors) and
    ``command``, checking ``tools/call`` with ``calls``. ``timeout``: seconds a tool call
    may take before the proxy cancels it (None: no limit)."""

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
    ) -> None:
        self.calls = calls
        self.command = list(command)
        self.host_in, self.host_out = host_in, host_out
        self.timeout = timeout
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.session = calls.process_session  # one stdio connection: one MCP session
        self.inflight: dict[Any, _Inflight] = {}
        self.listing: set[Any] = set()  # ids of the host's tools/list requests
        self.expired: set[Any] = set()  # calls answered here after a timeout
        self.own: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._own_ids = itertools.count(1)
        self.tools_complete = False  # a whole tool list has been declared
        self.exit_code: int | None = None

    # -- the run ---------------------------------------------------------------------------------
    async def run(self) -> int:
        """Relay until the host or the server closes; returns the proxy's exit status."""
        loop = asyncio.get_running_loop()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                limit=LINE_LIMIT,
                start_new_session=True,  # its own process group: stopped as a whole
            )
        except OSError as exc:
            logger.error("toolguard-mcp-proxy: cannot start %s: %s", self.command[0], exc)
            return 127
        self.host_reader = await _open_reader(self.host_in)
        self.host_writer = await _open_writer(self.host_out)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
        from_host = asyncio.create_task(self._from_host())
        from_server = asyncio.create_task(self._from_server())
        stopped = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait(
            {from_host, from_server, stopped}, return_when=asyncio.FIRST_COMPLETED
        )
        for task in done:
            if task is not stopped and not task.cancelled() and task.exception() is not None:
                logger.error("toolguard-mcp-proxy: relay failed", exc_info=task.exception())
        if from_server in done:
            code = await _exit_code(self.proc, _STOP_GRACE)
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
            status = 0
        for task in (from_host, from_server, stopped):
            task.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
        await self.host_writer.close()
        return status

    async def _stop_server(self) -> int | None:
        proc = self.proc
        if proc.returncode is None and proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        code = await _exit_code(proc, _STOP_GRACE)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if code is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            code = await _exit_code(proc, _STOP_GRACE)
        return code

    def _server_exited(self, code: int | None) -> None:
        in_flight = list(self.inflight.items())
        self.inflight.clear()
        for rid, entry in in_flight:
            _cancel_timer(entry)
            _safely(entry.pending.fail, ServerExited(code))
            self._write_host(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {
                        "code": CONNECTION_CLOSED,
                        "message": f"the MCP server behind toolguard-mcp-proxy exited "
                        f"(code {code}) before answering tools/call {entry.name}",
                    },
                }
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

    # -- host -> server ----------------------------------------------------------------------------
    async def _from_host(self) -> None:
        reader = self.host_reader
        while True:
            line = await reader.readline()
            if not line:
                return
            if not line.endswith(b"\n"):
                line += b"\n"
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                if line.strip():
                    await self._to_server(line)  # the server answers with a parse error
                continue
            if isinstance(msg, dict):
                await self._host_message(msg, line)
            elif isinstance(msg, list):
                # A JSON-RPC batch (MCP 2025-03-26 only): relayed one message at a time, so
                # each tools/call in it is checked like any other.
                for item in msg:
                    if isinstance(item, dict):
                        await self._host_message(item, orjson.dumps(item) + b"\n")
                    else:
                        await self._to_server(orjson.dumps(item) + b"\n")
            else:
                await self._to_server(line)

    async def _host_message(self, msg: dict[str, Any], raw: bytes) -> None:
        method = msg.get("method")
        params = msg.get("params")
        if "id" in msg and method is not None:
            rid = msg["id"]
            if method == "tools/call" and isinstance(params, dict) and _hashable(rid):
                await self._tools_call(rid, params, raw)
                return
            if method == "tools/list" and _hashable(rid):
                self.listing.add(rid)
        elif method == "notifications/cancelled" and isinstance(params, dict):
            rid = params.get("requestId")
            entry = self.inflight.pop(rid, None) if _hashable(rid) else None
            if entry is not None:
                _cancel_timer(entry)
                _safely(entry.pending.cancel)
        await self._to_server(raw)

    async def _tools_call(self, rid: Any, params: dict[str, Any], raw: bytes) -> None:
        name = params.get("name")
        if not isinstance(name, str):
            await self._to_server(raw)  # not a tool call the server can run; it says so
            return
        meta = params.get("_meta")
        # A tool that is not offered goes on to the server, which rejects it its own way;
        # the step still counts. (A list that cannot be read leaves it to the guard: blocked.)
        if (
            not self.calls.knows(name)
            and await self._list_tools(meta)
            and not self.calls.knows(name)
        ):
            _safely(self.calls.record_unknown, name, meta, self.session)
            await self._to_server(raw)
            return
        with _trace_parent(meta):
            pending = self.calls.check(name, params.get("arguments"), meta, self.session)
        if pending.rejection is not None:
            self._write_host(
                {"jsonrpc": "2.0", "id": rid, "result": error_result(str(pending.rejection))}
            )
            await self.host_writer.drain()
            return
        timer = None
        if self.timeout is not None:
            timer = asyncio.get_running_loop().call_later(self.timeout, self._expire, rid)
        old = self.inflight.pop(rid, None)
        if old is not None:  # the host reused an id still in flight
            _cancel_timer(old)
            _safely(old.pending.cancel)
        self.inflight[rid] = _Inflight(pending, name, timer)
        await self._to_server(raw)

    def _expire(self, rid: Any) -> None:
        entry = self.inflight.pop(rid, None)
        if entry is None:
            return
        _safely(entry.pending.cancel)
        if len(self.expired) >= _MAX_EXPIRED:
            self.expired.clear()
        self.expired.add(rid)
        self._write_host(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": error_result(
                    f"The tool `{entry.name}` did not answer within {self.timeout:g} s; "
                    "toolguard-mcp-proxy cancelled the call."
                ),
            }
        )
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": rid, "reason": f"timed out after {self.timeout:g} s"},
        }
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(orjson.dumps(notice) + b"\n")

    async def _list_tools(self, meta: Any) -> bool:
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
                page = await self._request("tools/list", params)
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
        self.calls.declare_tools(tools)
        self.tools_complete = True
        return True

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = f"toolguard-mcp-proxy/{next(self._own_ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.own[rid] = future
        try:
            await self._to_server(
                orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
                + b"\n"
            )
            # Bounded even without a call timeout: the host's call waits on this answer.
            answer = await asyncio.wait_for(future, self.timeout or _LIST_TIMEOUT)
        finally:
            self.own.pop(rid, None)
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise ServerError(error.get("code"), str(error.get("message", "")))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    async def _to_server(self, raw: bytes) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            return
        stdin.write(raw)
        with contextlib.suppress(ConnectionError):
            await stdin.drain()

    # -- server -> host ----------------------------------------------------------------------------
    async def _from_server(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        while True:
            line = await stdout.readline()
            if not line:
                return
            if not line.endswith(b"\n"):
                line += b"\n"
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                self.host_writer.write(line)
                continue
            if isinstance(msg, list):
                items = [m for m in msg if isinstance(m, dict)]
                forward = [m for m in items if self._server_message(m, forward_now=False)]
                if forward:
                    self.host_writer.write(orjson.dumps(forward) + b"\n")
                    for m in forward:
                        self._after_answer(m)
            elif isinstance(msg, dict):
                self._server_message(msg, line)
            else:
                self.host_writer.write(line)
            await self.host_writer.drain()

    def _server_message(
        self, msg: dict[str, Any], raw: bytes | None = None, *, forward_now: bool = True
    ) -> bool:
        """Route one message from the server; True when it goes on to the host."""
        if "method" not in msg:  # a response
            rid = msg.get("id")
            if not _hashable(rid):
                pass
            elif isinstance(rid, str) and rid in self.own:
                future = self.own[rid]
                if not future.done():
                    future.set_result(msg)
                return False
            elif rid in self.expired:
                self.expired.discard(rid)  # answered already, after the timeout
                return False
            if forward_now:
                # The host is waiting for this answer: it goes out before the bookkeeping.
                self.host_writer.write(raw if raw is not None else orjson.dumps(msg) + b"\n")
                self._after_answer(msg)
            return True
        if msg.get("method") == "notifications/tools/list_changed":
            self.tools_complete = False
        if forward_now:
            self.host_writer.write(raw if raw is not None else orjson.dumps(msg) + b"\n")
        return True

    def _after_answer(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        if not _hashable(rid):
            return
        entry = self.inflight.pop(rid, None)
        if entry is not None:
            _cancel_timer(entry)
            error = msg.get("error")
            if error is not None:
                error = error if isinstance(error, dict) else {}
                _safely(
                    entry.pending.fail,
                    ServerError(error.get("code"), str(error.get("message", ""))),
                )
            else:
                _safely(CallGuard.finish, entry.pending, msg.get("result") or {})
        elif rid in self.listing:
            self.listing.discard(rid)
            result = msg.get("result")
            if isinstance(result, dict) and isinstance(result.get("tools"), list):
                complete = not result.get("nextCursor")
                _safely(self.calls.declare_tools, result["tools"], complete=complete)
                # Only a one-page list is known whole (a later page has a cursor in its request).
                self.tools_complete = self.tools_complete or complete

    def _write_host(self, message: dict[str, Any]) -> None:
        self.host_writer.write(orjson.dumps(message) + b"\n")


# -- helpers -----------------------------------------------------------------------------------
def _hashable(value: Any) -> bool:
    return isinstance(value, str | int)


def _cancel_timer(entry: _Inflight) -> None:
    if entry.timer is not None:
        entry.timer.cancel()


def _safely(fn: Any, *args: Any, **kwargs: Any) -> None:
    """Bookkeeping after the host has its answer must never stop the relay."""
    try:
        fn(*args, **kwargs)
    except Exception:
        logger.exception("toolguard-mcp-proxy: recording a call failed")


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


async def _exit_code(proc: asyncio.subprocess.Process, timeout: float) -> int | None:
    # Polled: on 3.11+ proc.wait() also waits for the pipes' EOF, which a grandchild that
    # inherited them can hold open after the server itself has exited.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while proc.returncode is None and loop.time() < deadline:
        await asyncio.sleep(0.01)
    return proc.returncode


class _Writer:
    """Writes to the host: an asyncio pipe transport, or plain writes for a regular file."""

    def __init__(self, fd: int, stream: asyncio.StreamWriter | None) -> None:
        self.fd = fd
        self.stream = stream

    def write(self, data: bytes) -> None:
        if self.stream is not None:
            if not self.stream.is_closing():
                self.stream.write(data)
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    async def drain(self) -> None:
        if self.stream is not None:
            with contextlib.suppress(ConnectionError):
                await self.stream.drain()

    async def close(self) -> None:
        """Flush and close, so the host reads the end of the stream now."""
        if self.stream is not None:
            await self.drain()
            self.stream.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


async def _open_writer(fd: int) -> _Writer:
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
    try:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), pipe
        )
    except ValueError:  # not a pipe, socket or character device
        return _Writer(fd, None)
    return _Writer(fd, asyncio.StreamWriter(transport, protocol, None, loop))


async def _open_reader(fd: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
    pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except ValueError:  # a regular file: read it on a thread

        def pump() -> None:
            while chunk := os.read(fd, 65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=pump, daemon=True, name="toolguard-mcp-stdin").start()
    return reader
