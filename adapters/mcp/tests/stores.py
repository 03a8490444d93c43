"""Trajectory stores that stop answering, for the tests of what the guard does then: a fake
that accepts connections and answers nothing until released (held on events, not timers),
and a real ``redis-server`` on a free port that can be stopped (SIGSTOP) and resumed."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

BOUND = 60.0  # a bound against a hung test, never a measurement
# Round trips that wait as long as the store holds them: the store, not a timer, decides.
HELD = "socket_timeout=600&socket_connect_timeout=600"


class HungStore:
    """A TCP server that accepts every connection, reads what it is sent and answers
    nothing until ``release()``; from then on it closes every connection, held or new (a
    store that went away)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.released = False
        self.lock = threading.Condition()
        self.asked = 0  # connections that sent a command and are waiting for its answer
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, options: str = HELD) -> str:
        return f"redis://127.0.0.1:{self.port}/0?{options}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:  # never a connection kept open after the release
                if self.released:
                    conn.close()
                    continue
                self.conns.append(conn)
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        try:
            if not conn.recv(65536):
                return
        except OSError:
            return
        with self.lock:
            self.asked += 1
            self.lock.notify_all()

    def wait_for(self, n: int) -> None:
        with self.lock:
            assert self.lock.wait_for(lambda: self.asked >= n, BOUND), self.asked

    def release(self) -> None:
        with self.lock:
            self.released = True
            for conn in self.conns:
                conn.close()
            self.conns.clear()

    def close(self) -> None:
        self.release()
        self.listener.close()


class Redis:
    """redis-server on a free loopback port, persisting nothing (tests/store/redis_server.py's
    pattern): ``pause()`` (SIGSTOP: holds connections, answers nothing), ``resume()``."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("no redis-server binary: apt-get install -y redis-server")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + BOUND  # a bound on start-up
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.02)

    def url(self, options: str = "") -> str:
        return f"redis://127.0.0.1:{self.port}/0" + (f"?{options}" if options else "")

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.proc.terminate()
        self.proc.wait(BOUND)
