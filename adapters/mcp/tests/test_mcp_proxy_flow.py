"""A burst far larger than the pipes (issue 22, section 3): the proxy reads and writes its
pipes from the event loop's callbacks, with flow control instead of ``drain()``; whatever the
scheduler makes of the burst (pipes full or not), every answer arrives once, in order."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import PROXY
from raw_client import WAIT

TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
BURST = 1000
PAD = "p" * 1000  # each answer carries its id: 1 MB of answers through 64 KiB pipes (16 x)


def test_a_burst_larger_than_the_pipes_is_answered_whole_and_in_order(tmp_path: Path) -> None:
    pytest.importorskip("mcp_server_time", reason="mcp-server-time is in the [test] extra")
    proc = subprocess.Popen(
        [str(PROXY), "--no-spans", "--", *TIME_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "proxy.log").open("wb"),
    )
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-06-18", "capabilities": {}}
    init["clientInfo"] = {"name": "flow", "version": "1"}
    lines = [{"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": init}]
    lines.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
    lines += [{"jsonrpc": "2.0", "id": f"{i}-{PAD}", "method": "ping"} for i in range(BURST)]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)

    def send() -> None:
        assert proc.stdin is not None
        proc.stdin.write(data)  # blocks while the proxy holds back: the reader below frees it
        proc.stdin.flush()

    writer = threading.Thread(target=send, daemon=True)
    writer.start()
    try:
        ids = []
        while len(ids) < BURST + 1:
            line = proc.stdout.readline()
            assert line, (tmp_path / "proxy.log").read_text()
            answer = json.loads(line)
            assert "result" in answer, answer
            ids.append(answer["id"])
        writer.join(WAIT)
        assert ids == ["init"] + [f"{i}-{PAD}" for i in range(BURST)]
    finally:
        proc.stdin.close()
        proc.wait(WAIT)
