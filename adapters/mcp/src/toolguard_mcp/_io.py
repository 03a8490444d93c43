"""The stdio proxy's pipes: the host's stdin and stdout as asyncio streams (or plain reads and
writes where they are regular files), and the server's exit code."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading

LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message; tool lists and results can be large


async def exit_code(proc: asyncio.subprocess.Process, timeout: float) -> int | None:
    # Polled: on 3.11+ proc.wait() also waits for the pipes' EOF, which a grandchild that
    # inherited them can hold open after the server itself has exited.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while proc.returncode is None and loop.time() < deadline:
        await asyncio.sleep(0.01)
    return proc.returncode


class Writer:
    """Writes to the host: an asyncio pipe transport, or plain writes for a regular file."""

    def __init__(
        self, fd: int, stream: asyncio.StreamWriter | None, *, discard: bool = False
    ) -> None:
        self.fd = fd
        self.stream = stream
        self.discard = discard  # no host yet (the proxy's own start): nothing to write to

    def write(self, data: bytes) -> None:
        if self.discard:
            return
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
        if self.discard:
            return
        if self.stream is not None:
            await self.drain()
            self.stream.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


async def open_writer(fd: int) -> Writer:
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
    try:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), pipe
        )
    except ValueError:  # not a pipe, socket or character device
        return Writer(fd, None)
    return Writer(fd, asyncio.StreamWriter(transport, protocol, None, loop))


async def open_reader(fd: int, limit: int = LINE_LIMIT) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
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
