"""A real redis-server for the store's tests, on a free loopback port, persisting nothing."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

BINARY = shutil.which("redis-server")
SKIP_REASON = (
    "no redis-server binary: install it with 'apt-get install -y redis-server' (make redis "
    "does as root) to run the trajectory store's tests against a real Redis"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process: ``url``, ``stop()``, ``start()`` again on the same port."""

    def __init__(self, workdir: Path) -> None:
        if BINARY is None:
            pytest.skip(SKIP_REASON)
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        assert BINARY is not None
        self.proc = subprocess.Popen(
            [
                BINARY,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the server holds connections and answers nothing (a slow store)."""
        assert self.proc is not None
        self.proc.send_signal(19)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(18)
