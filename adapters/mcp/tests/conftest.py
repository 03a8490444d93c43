"""Fixtures for the MCP adapter's tests: real OpenTelemetry SDK providers (never the global
one), a temporary git repository, the proxy as a subprocess behind an ``mcp`` client, and the
Node memory server installed from npm once per session (the install starts with the session
and runs beside the other tests)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import toolguard as tg
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from stores import HungStore, Redis

HERE = Path(__file__).parent
EXAMPLES = HERE.parent / "examples"
MEMORY_PACKAGE = "@modelcontextprotocol/server-memory"
EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"


@dataclass
class Telemetry:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def guard(self, **options: Any) -> tg.Guard:
        return tg.Guard(tracer_provider=self.provider, **options)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def call_spans(self) -> list[ReadableSpan]:
        """Call spans by their attributes (docs/protocol.md, section 5, rule 2)."""
        return [s for s in self.spans() if "toolguard.step" in (s.attributes or {})]

    def summaries(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == "toolguard.trajectory"]


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Telemetry(provider, exporter)
    provider.shutdown()


@pytest.fixture
def span_file(tmp_path: Path) -> Iterator[tuple[TracerProvider, Path]]:
    """A provider writing through the official OTLP JSON Lines file exporter."""
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    yield provider, path
    provider.shutdown()


def report_of(path: Path) -> tuple[list[Any], dict[str, Any]]:
    records, _ = tg.read_records([str(path)])
    return records, tg.build_report(records)


# -- git ----------------------------------------------------------------------------------------
def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the mcp-server-git tests need a repository")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ana@example.com")
    git(repo, "config", "user.name", "Ana")
    git(repo, "config", "commit.gpgsign", "false")
    for name, text in (("a.txt", "one\n"), ("b.txt", "two\n")):
        (repo / name).write_text(text)
        git(repo, "add", name)
        git(repo, "commit", "-q", "-m", f"add {name}")
    git(repo, "branch", "feature")
    return repo


# -- the proxy ----------------------------------------------------------------------------------
PROXY = Path(sys.executable).parent / "toolguard-mcp-proxy"


@dataclass
class ProxyRun:
    spans: Path
    log: Path

    def stderr(self) -> str:
        return self.log.read_text()


@asynccontextmanager
async def proxied(
    tmp_path: Path,
    server: list[str],
    *options: str,
    env: dict[str, str] | None = None,
    mode: str = "auto",
    elicitation_callback: Any = None,
) -> AsyncIterator[tuple[Any, ProxyRun]]:
    """An ``mcp`` client session with ``toolguard-mcp-proxy [options] -- server`` over stdio.
    The proxy's stderr goes to a file; its spans to ``spans.jsonl``. Leaving the block closes
    the session, which ends the proxy (its spans are flushed before it exits)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    run = ProxyRun(tmp_path / "spans.jsonl", tmp_path / "proxy.log")
    params = StdioServerParameters(
        command=str(PROXY),
        args=["--spans", str(run.spans), *options, "--", *server],
        # PYTHONPATH passed on: the proxy runs the code under test (a worktree's), not only
        # what the venv installed (the mcp client gives a child a minimal environment).
        env={"PYTHONUNBUFFERED": "1", **_pythonpath(), **(env or {})},
        cwd=str(tmp_path),
    )
    with run.log.open("w") as log:
        async with Client(
            stdio_client(params, errlog=log),
            mode=mode,
            cache=None,
            elicitation_callback=elicitation_callback,
        ) as client:
            yield client, run


def _pythonpath() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": path} if path else {}


def python_server(*args: str) -> list[str]:
    return [sys.executable, *args]


# -- the Node server from npm -------------------------------------------------------------------
@dataclass
class NpmInstall:
    prefix: Path
    process: subprocess.Popen[bytes] | None
    log: Path


@pytest.fixture(scope="session", autouse=True)
def _npm_install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NpmInstall | None]:
    """Start ``npm install`` for the Node server as the session starts, so it downloads while
    the other tests run; the Node test waits for it."""
    npm = shutil.which("npm")
    if npm is None:
        yield None
        return
    prefix = tmp_path_factory.mktemp("npm")
    log = prefix / "npm-install.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--prefer-offline", "--ignore-scripts", "--loglevel=error", MEMORY_PACKAGE,
             EVERYTHING_PACKAGE],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "npm_config_update_notifier": "false"},
        )  # fmt: skip
    install = NpmInstall(prefix, process, log)
    yield install
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture
def memory_server(_npm_install: NpmInstall | None) -> list[str]:
    """The command line of the official Node memory server, installed from npm."""
    return _node_server(_npm_install, MEMORY_PACKAGE)


@pytest.fixture
def everything_server(_npm_install: NpmInstall | None) -> list[str]:
    """The official Node server that exercises every feature of MCP, over stdio."""
    return [*_node_server(_npm_install, EVERYTHING_PACKAGE), "stdio"]


def _node_server(install: NpmInstall | None, package_name: str) -> list[str]:
    if install is None:
        pytest.skip(
            f"npm is not installed: cannot install the Node server {package_name} "
            "(CI installs nodejs and npm with apt-get)"
        )
    node = shutil.which("node")
    if node is None:
        pytest.skip(f"node is not installed: cannot run the Node server {package_name}")
    assert install.process is not None
    code = install.process.wait(timeout=600)
    if code != 0:
        pytest.fail(f"npm install of the Node servers failed:\n{install.log.read_text()}")
    package = install.prefix / "node_modules" / package_name
    entry = json.loads((package / "package.json").read_text())["bin"]
    if not isinstance(entry, str):
        entry = next(iter(entry.values()))
    return [node, str(package / entry)]


@pytest.fixture
def time_server() -> list[str]:
    """The official Python time server (mcp-server-time, the [test] extra), a server the
    proxy was never shaped around."""
    pytest.importorskip("mcp_server_time", reason="mcp-server-time is in the [test] extra")
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


@asynccontextmanager
async def http_proxied(
    tmp_path: Path, server: list[str], *options: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, ProxyRun, Any]]:
    """``toolguard-mcp-proxy --http 127.0.0.1:0 [options] -- server``: yields its URL (read
    from the line it logs once listening), the run (its whole stderr in ``run.log``) and the
    process; stopped with SIGTERM."""
    import re
    import signal

    import anyio

    run = ProxyRun(tmp_path / "spans.jsonl", tmp_path / "proxy.log")
    with run.log.open("wb") as log:
        proc = await anyio.open_process(
            [str(PROXY), "--http", "127.0.0.1:0", "--spans", str(run.spans), *options,
             "--", *server],
            stdin=None,
            stderr=log,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
    try:
        found = None
        with anyio.fail_after(120):  # a bound on start-up, not a measurement
            while found is None:
                found = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp)", run.stderr())
                assert found or proc.returncode is None, run.stderr()
                await anyio.sleep(0.02)
        yield found.group(1), run, proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(60):
            await proc.wait()


@pytest.fixture
def hung_store() -> Iterator[HungStore]:
    store = HungStore()
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    server = Redis(tmp_path)
    try:
        yield server
    finally:
        server.stop()
