"""Arize Phoenix as a subprocess of the test: free ports, its own working directory, readiness
by the server's own signal, and a failure that names the URL and the tail of Phoenix's stderr.

Ready means: the server said so itself (uvicorn's "Application startup complete." on its
output), then ``/healthz`` answered 200. Each probe may take its time (``_PROBE_TIMEOUT_S``):
a loaded 2-core machine answered the first probes in more than the 2 s that used to be
allowed, and a server that was up was never seen (3 runs of 3 failed).

Never imports phoenix: the server runs in its own process, so collecting these tests (also in
the main venv, where Phoenix is not installed) loads nothing of it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

SKIP_REASON = "needs arize-phoenix: run make test-backends"
PHOENIX_MISSING = importlib.util.find_spec("phoenix") is None
# Phoenix starts in about 20 s on an idle 2-core machine; a shared one may take several times
# that. TOOLGUARD_PHOENIX_START_TIMEOUT (seconds) overrides the bound.
START_TIMEOUT_S = float(os.environ.get("TOOLGUARD_PHOENIX_START_TIMEOUT", "240"))
_STOP_TIMEOUT_S = 30.0
_PROBE_TIMEOUT_S = 30.0
# What uvicorn (Phoenix's server) writes once the app has started and the socket listens.
_READY_SIGNS = (b"Application startup complete", b"Uvicorn running on")


@dataclass
class PhoenixServer:
    url: str  # http://127.0.0.1:PORT, the UI, the REST API and OTLP over HTTP (/v1/traces)
    process: subprocess.Popen[bytes]
    workdir: Path

    def stderr_tail(self, lines: int = 30) -> str:
        path = self.workdir / "phoenix.stderr"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:]) or "(nothing on stderr)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def phoenix_command() -> list[str]:
    """The `phoenix` console script of this interpreter's environment."""
    beside = Path(sys.executable).with_name("phoenix")
    found = str(beside) if beside.exists() else shutil.which("phoenix")
    if found is None:
        pytest.fail(f"arize-phoenix is importable but no `phoenix` command beside {sys.executable}")
    return [found, "serve"]


def _healthy(url: str, timeout: float = _PROBE_TIMEOUT_S) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=timeout) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def said_ready(workdir: Path) -> bool:
    """Phoenix's own output says the server started (it logs to either stream)."""
    for name in ("phoenix.stderr", "phoenix.stdout"):
        path = workdir / name
        if path.exists() and any(sign in path.read_bytes() for sign in _READY_SIGNS):
            return True
    return False


@contextmanager
def running_phoenix(workdir: Path) -> Iterator[PhoenixServer]:
    """Start `phoenix serve` on free ports with ``workdir`` as its working directory, wait
    until ``/healthz`` answers, and stop it afterwards."""
    port, grpc_port = free_port(), free_port()
    # Phoenix's own OTel settings must not come from ours (it could trace itself to us).
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_TELEMETRY_ENABLED": "false",  # no usage telemetry sent anywhere
    }
    workdir.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    with open(workdir / "phoenix.stdout", "wb") as out, open(workdir / "phoenix.stderr", "wb") as e:
        process = subprocess.Popen(
            phoenix_command(), env=env, stdout=out, stderr=e, stdin=subprocess.DEVNULL
        )
    server = PhoenixServer(url, process, workdir)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        # Probed only once the server says it has started (before that, a probe only loads a
        # machine that is busy starting it), or every few seconds should its log say nothing.
        last_probe = time.monotonic()
        while True:
            now = time.monotonic()
            if (said_ready(workdir) or now - last_probe > 5) and _healthy(url):
                break
            if now - last_probe > 5:
                last_probe = now
            if process.poll() is not None:
                pytest.fail(
                    f"Phoenix exited with status {process.returncode} before {url}/healthz "
                    f"answered; its stderr ends with:\n{server.stderr_tail()}"
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"Phoenix did not answer at {url}/healthz within {START_TIMEOUT_S:g} s "
                    f"(TOOLGUARD_PHOENIX_START_TIMEOUT); its stderr ends with:\n"
                    f"{server.stderr_tail()}"
                )
            time.sleep(0.25)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
