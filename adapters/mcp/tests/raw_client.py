"""A raw JSON-RPC client for ``toolguard-mcp-proxy`` over stdio: it writes whatever bytes a
test gives it (invalid UTF-8, ``NaN``, odd ids, batches) and reads the proxy's answers line by
line, which no MCP SDK client can be made to do. Answers are awaited on a queue fed by a
reader thread, with a generous bound that only guards against a hung test."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from conftest import PROXY

WAIT = float(os.environ.get("RAW_CLIENT_WAIT", "60"))  # a bound against a hung test only


class RawProxy:
    def __init__(
        self, tmp_path: Path, server: list[str], *options: str, record: bool = False
    ) -> None:
        """``record``: the spans are written by ``--record`` instead of ``--spans``."""
        self.spans = tmp_path / "spans.jsonl"
        self.log = tmp_path / "proxy.log"
        tmp_path.mkdir(parents=True, exist_ok=True)
        self._err = self.log.open("wb")
        spans = ["--record" if record else "--spans", str(self.spans)]
        self.process = subprocess.Popen(
            [str(PROXY), *spans, *options, "--", *server],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            cwd=str(tmp_path),
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self._next = 0
        self.other: list[Any] = []

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, data: bytes | Any) -> None:
        if not isinstance(data, bytes):
            data = json.dumps(data).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(data.rstrip(b"\n") + b"\n")
        self.process.stdin.flush()

    def read(self) -> Any:
        line = self.lines.get(timeout=WAIT)
        assert line, f"the proxy closed its stdout; stderr:\n{self.stderr()}"
        return json.loads(line)

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send a request and return its answer; what the server sends meanwhile (its
        notifications and requests) is kept in ``self.other``."""
        self._next += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            answer = self.read()
            if not (isinstance(answer, dict) and "method" in answer):
                return answer
            self.other.append(answer)

    def initialize(self) -> Any:
        answer = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-client", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=WAIT)
        self._err.close()
        return code

    def stderr(self) -> str:
        if not self._err.closed:
            self._err.flush()
        return self.log.read_text(errors="replace")
