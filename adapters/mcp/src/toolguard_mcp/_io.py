"""The stdio proxy's pipes, read and written from the event loop's own callbacks.

What arrives on a pipe is handed to the relay in the callback that read it (no task to wake,
no extra turn of the loop per message), and the relay answers in that same callback. Flow
control replaces ``drain()``: a writer whose pipe fills or empties tells the relay
(``on_change``), which stops reading the side that feeds it until the pipe has room again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message; tool lists and results can be large
_CLOSE_WAIT = 5.0  # seconds a closing writer waits for its pipe to take what is left


async def exit_code(server: asyncio.SubprocessTransport, timeout: float) -> int | None:
    # Polled: waiting for the exit through the transport also waits for the pipes' EOF, which a
    # grandchild that inherited them can hold open after the server itself has exited.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while server.get_returncode() is None and loop.time() < deadline:
        await asyncio.sleep(0.01)
    return server.get_returncode()


class _Flow(asyncio.Protocol):
    """A write pipe's protocol: the transport's pause and resume passed on to the writer."""

    def __init__(self) -> None:
        self.writer: Writer | None = None
        self.lost = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        if self.writer is not None:
            self.writer.paused(True)

    def resume_writing(self) -> None:
        if self.writer is not None:
            self.writer.paused(False)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


class Writer:
    """Writes to a pipe: its asyncio transport, or plain writes for a regular file (``fd``).

    ``cork()`` ... ``uncork()`` gathers what is written in between into one write (the
    answers to a chunk of messages read at once). ``on_change`` is called when the pipe gets
    full (``full``) and when it has room again."""

    def __init__(
        self,
        transport: asyncio.WriteTransport | None,
        *,
        fd: int | None = None,
        flow: _Flow | None = None,
        discard: bool = False,
    ) -> None:
        self.transport = transport
        self.fd = fd
        self.flow = flow
        if flow is not None:
            flow.writer = self
        self.discard = discard  # no host yet (the proxy's own start): nothing to write to
        self.on_change: Callable[[], None] | None = None
        self.full = False
        self._parts: list[bytes] = []
        self._corked = 0
        self._resumed: asyncio.Event | None = None

    def write(self, data: bytes) -> None:
        if self.discard:
            return
        if self._corked:
            self._parts.append(data)
        else:
            self._send(data)

    def cork(self) -> None:
        self._corked += 1

    def uncork(self) -> None:
        self._corked -= 1
        if not self._corked and self._parts:
            parts, self._parts = self._parts, []
            self._send(parts[0] if len(parts) == 1 else b"".join(parts))

    def _send(self, data: bytes) -> None:
        if self.transport is not None:
            if not self.transport.is_closing():
                self.transport.write(data)
            return
        if self.fd is None:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def paused(self, full: bool) -> None:
        self.full = full
        if self.on_change is not None:
            self.on_change()
        if not full and self._resumed is not None:
            self._resumed.set()

    async def drain(self) -> None:
        """Wait while the pipe is full (the reader is slow)."""
        while self.full and self.transport is not None and not self.transport.is_closing():
            self._resumed = asyncio.Event()
            await self._resumed.wait()

    def closing(self) -> bool:
        return self.transport is not None and self.transport.is_closing()

    async def close(self) -> None:
        """Flush and close, so the reader sees the end of the stream now."""
        if self.discard:
            return
        if self.transport is not None:
            self.transport.close()  # writes what is buffered first, then closes
            if self.flow is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self.flow.lost), _CLOSE_WAIT)
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)


async def open_writer(fd: int) -> Writer:
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
    flow = _Flow()
    try:
        transport, _ = await loop.connect_write_pipe(lambda: flow, pipe)
    except ValueError:  # not a pipe, socket or character device
        return Writer(None, fd=fd)
    return Writer(transport, fd=fd, flow=flow)


class _Reading(asyncio.Protocol):
    def __init__(self, on_data: Callable[[bytes], None], on_end: Callable[[], None]) -> None:
        self.on_data, self.on_end = on_data, on_end
        self.ended = False

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self.on_end()


async def open_reader(
    fd: int, on_data: Callable[[bytes], None], on_end: Callable[[], None]
) -> asyncio.ReadTransport | None:
    """Hand what arrives on ``fd`` to ``on_data`` in the loop, then call ``on_end``. Returns
    the transport (to pause), or None for a regular file, which is read on a thread."""
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: _Reading(on_data, on_end), pipe)
    except ValueError:  # a regular file: read it on a thread
        reading = _Reading(on_data, on_end)

        def pump() -> None:
            while chunk := os.read(fd, 65536):
                loop.call_soon_threadsafe(reading.data_received, chunk)
            loop.call_soon_threadsafe(reading.connection_lost, None)

        threading.Thread(target=pump, daemon=True, name="toolguard-mcp-stdin").start()
        return None
    return transport


async def spawn(
    command: Sequence[str],
    on_data: Callable[[bytes], None],
    on_end: Callable[[], None],
    *,
    env: Mapping[str, str] | None,
    cwd: str | None,
    options: Mapping[str, Any],
) -> tuple[asyncio.SubprocessTransport, Writer, asyncio.ReadTransport]:
    """Start ``command`` with pipes on its stdin and stdout (stderr is the proxy's), and
    ``options`` for ``subprocess.Popen``: its transport, a :class:`Writer` to its stdin and
    the transport reading its stdout (to pause).

    The pipes are the relay's own, read and written like the host's: a subprocess transport's
    pipes hand what they read to its protocol one turn of the loop later (``call_soon``), a
    turn each answer of the server would wait before the relay sees it."""
    loop = asyncio.get_running_loop()
    # Made here, so the child's ends close in the proxy once it has them (non-inheritable,
    # so no other child gets them either).
    child_in, stdin_fd = os.pipe()
    stdout_fd, child_out = os.pipe()
    try:
        transport, _ = await loop.subprocess_exec(
            asyncio.SubprocessProtocol,
            *command,
            stdin=child_in,
            stdout=child_out,
            stderr=None,
            env=env,
            cwd=cwd,
            **options,
        )
    except BaseException:
        for fd in (stdin_fd, stdout_fd):
            os.close(fd)
        raise
    finally:
        os.close(child_in)
        os.close(child_out)
    flow = _Flow()
    stdin, _ = await loop.connect_write_pipe(lambda: flow, os.fdopen(stdin_fd, "wb", buffering=0))
    stdout, _ = await loop.connect_read_pipe(
        lambda: _Reading(on_data, on_end), os.fdopen(stdout_fd, "rb", buffering=0)
    )
    return transport, Writer(stdin, flow=flow), stdout
