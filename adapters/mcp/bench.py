"""Latency and throughput ``toolguard mcp-proxy`` adds over stdio (issue 22, section 3).

The same server twice, from one ``mcp`` client process: once directly, once behind the proxy
(with its span file, as a user runs it). Latency: calls alternate between the two in every
round (the order flips each round), all in one run, after a warm-up; the added latency is the
median with minus the median without. Throughput: rounds of calls with 50 in flight at once,
alternating between the two. Servers: mcp-server-time (Python) and
``@modelcontextprotocol/server-everything`` (Node, installed from npm into a temporary folder
when npm is there), plus an ``echo`` server that does nothing, which shows the relay's cost.
Each server is also measured behind a floor relay (``FLOOR_RELAY``: lines both ways, each
parsed, nothing checked or traced), printed as ``floor``: what the extra process costs by
itself on this machine, so what the proxy adds beyond it is its own.

Targets: added median latency <= 1 ms for the Python and the Node server; throughput with 50
calls in flight >= 80% of direct. Prints each as met or MISSED.

    .venv/bin/python adapters/mcp/bench.py [--rounds 1000] [--no-node]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).parent
PROXY = Path(sys.executable).parent / "toolguard-mcp-proxy"
ECHO_SERVER = """
import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    return text


anyio.run(server.run_stdio_async)
"""
# The least any Python relay does, for the floor: lines both ways, each parsed and written
# again (as the proxy forwards what it parsed), one write per chunk read; nothing checked,
# nothing traced. What the proxy adds beyond this is its own; this much is the extra process.
FLOOR_RELAY = """
import asyncio, os, sys
import orjson


def splitter(write):
    partial = b""

    def feed(data):
        nonlocal partial
        *lines, partial = (partial + data).split(b"\\n")
        out = [orjson.dumps(orjson.loads(line)) + b"\\n" for line in lines if line.strip()]
        if out:
            write(b"".join(out))

    return feed


class Host(asyncio.Protocol):
    def __init__(self, feed, done):
        self.data_received, self.done = feed, done

    def connection_lost(self, exc):
        self.done.set_result(None)


class Server(asyncio.SubprocessProtocol):
    def __init__(self, feed):
        self.feed = feed

    def pipe_data_received(self, fd, data):
        self.feed(data)


async def main():
    loop = asyncio.get_running_loop()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(1, "wb", buffering=0))
    server, _ = await loop.subprocess_exec(
        lambda: Server(splitter(out.write)), *sys.argv[1:], stdin=-1, stdout=-1, stderr=None
    )
    done = loop.create_future()
    stdin = server.get_pipe_transport(0)
    await loop.connect_read_pipe(
        lambda: Host(splitter(stdin.write), done), os.fdopen(0, "rb", buffering=0)
    )
    await done
    server.close()


asyncio.run(main())
"""
IN_FLIGHT = 50
LATENCY_TARGET_MS = 1.0
THROUGHPUT_TARGET = 0.80


def proxy_cpu_seconds(marker: bytes = b"toolguard-mcp-proxy") -> float | None:
    """CPU time (user + system) of this process's children whose command line holds
    ``marker`` (the proxy's, or the floor relay's), from /proc: what the relay itself spends,
    whatever the scheduler adds on a busy machine."""
    total, found = 0.0, False
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == os.getpid() and marker in cmdline:
            total += (int(fields[11]) + int(fields[12])) / ticks
            found = True
    return total if found else None


def _env() -> dict[str, str] | None:
    """PYTHONPATH for the relay, so it runs the code this interpreter would import (a
    worktree's); the mcp client gives a child only a minimal environment otherwise."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": path} if path else None


def relay_command(via: list[str]) -> list[str]:
    """The proxy with ``via`` as its options, or ``via`` itself when it names the floor relay."""
    return via if via[-1].endswith(".py") else [str(PROXY), *via, "--"]


async def measure(
    server: list[str], via: list[str], tool: str, args: dict[str, Any], rounds: int
) -> tuple[list[float], list[float], float | None]:
    from mcp import Client, StdioServerParameters

    relay = relay_command(via)
    marker = relay[-1].encode() if relay[-1].endswith(".py") else b"toolguard-mcp-proxy"
    direct = StdioServerParameters(command=server[0], args=server[1:])
    proxied = StdioServerParameters(command=relay[0], args=[*relay[1:], *server], env=_env())
    async with Client(direct, cache=None) as a, Client(proxied, cache=None) as b:
        for client in (a, b):
            for _ in range(30):  # warm-up: imports, caches, the guard's first declarations
                result = await client.call_tool(tool, args)
                assert not result.is_error, result
        without: list[float] = []
        with_proxy: list[float] = []
        cpu_before = proxy_cpu_seconds(marker)
        for i in range(rounds):
            order = ((a, without), (b, with_proxy)) if i % 2 else ((b, with_proxy), (a, without))
            for client, times in order:
                start = time.perf_counter()
                await client.call_tool(tool, args)
                times.append(time.perf_counter() - start)
        cpu_after = proxy_cpu_seconds(marker)
    cpu = None
    if cpu_before is not None and cpu_after is not None:
        cpu = (cpu_after - cpu_before) / rounds
    return without, with_proxy, cpu


async def throughput(
    server: list[str], via: list[str], tool: str, args: dict[str, Any], rounds: int
) -> tuple[float, float]:
    """Calls per second with IN_FLIGHT at once, direct and behind the proxy (rounds alternate)."""
    from mcp import Client, StdioServerParameters

    relay = relay_command(via)
    direct = StdioServerParameters(command=server[0], args=server[1:])
    proxied = StdioServerParameters(command=relay[0], args=[*relay[1:], *server], env=_env())
    spent = {"direct": 0.0, "proxy": 0.0}

    async def burst(client: Any) -> float:
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(IN_FLIGHT):
                tg.start_soon(client.call_tool, tool, args)
        return time.perf_counter() - start

    async with Client(direct, cache=None) as a, Client(proxied, cache=None) as b:
        for client in (a, b):
            await burst(client)  # warm-up
        for i in range(rounds):
            order = (("direct", a), ("proxy", b)) if i % 2 else (("proxy", b), ("direct", a))
            for key, client in order:
                spent[key] += await burst(client)
    calls = rounds * IN_FLIGHT
    return calls / spent["direct"], calls / spent["proxy"]


def run_case(
    name: str, server: list[str], via: list[str], tool: str, args: dict[str, Any],
    rounds: int,
) -> float:  # fmt: skip
    without, with_proxy, cpu = anyio.run(measure, server, via, tool, args, rounds)
    return summary(name, without, with_proxy, cpu)


def summary(name: str, without: list[float], with_proxy: list[float], cpu: float | None) -> float:
    m0, m1 = statistics.median(without) * 1e3, statistics.median(with_proxy) * 1e3
    added, ratio = m1 - m0, m1 / m0
    paired = statistics.median(b - a for a, b in zip(without, with_proxy, strict=True)) * 1e3
    spent = f"   proxy CPU {cpu * 1e3:.3f} ms/call" if cpu is not None else ""
    print(
        f"{name:<12} without {m0:7.3f} ms   with proxy {m1:7.3f} ms   added {added:+.3f} ms "
        f"(paired median {paired:+.3f} ms)   ratio {ratio:.3f}{spent}   n={len(without)}"
    )
    return added


def node_server(root: Path) -> list[str] | None:
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        return None
    package = "@modelcontextprotocol/server-everything"
    subprocess.run(
        [npm, "install", "--prefix", str(root), "--no-audit", "--no-fund", "--prefer-offline",
         "--ignore-scripts", "--loglevel=error", package],
        check=True,
    )  # fmt: skip
    folder = root / "node_modules" / package
    entry = json.loads((folder / "package.json").read_text())["bin"]
    entry = entry if isinstance(entry, str) else next(iter(entry.values()))
    return [node, str(folder / entry), "stdio"]


def verdict(what: str, ok: bool) -> bool:
    print(f"  {what}: {'met' if ok else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000, help="latency rounds per case")
    parser.add_argument("--bursts", type=int, default=200, help="throughput rounds per case")
    parser.add_argument("--no-node", action="store_true", help="skip the Node server")
    options = parser.parse_args()
    results: list[bool] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        echo = root / "echo_server.py"
        echo.write_text(ECHO_SERVER)
        spans = ["--spans", str(root / "spans.jsonl")]
        (root / "floor_relay.py").write_text(FLOOR_RELAY)
        floor = [sys.executable, str(root / "floor_relay.py")]
        cases: list[tuple[str, list[str], str, dict[str, Any]]] = [
            ("time (Python)", [sys.executable, "-m", "mcp_server_time", "--local-timezone",
                               "UTC"], "get_current_time", {"timezone": "UTC"}),
        ]  # fmt: skip
        node = None if options.no_node else node_server(root / "npm")
        if node is not None:
            cases.append(("everything (Node)", node, "echo", {"message": "x"}))
        else:
            print("the Node server is not measured (--no-node, or no npm/node)")
        print(
            f"tools/call over stdio: {options.rounds} interleaved rounds for latency, "
            f"{options.bursts} rounds of {IN_FLIGHT} calls in flight for throughput; "
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        )
        for name, server, tool, args in cases:
            added = run_case(name, server, spans, tool, args, options.rounds)
            direct, proxied = anyio.run(throughput, server, spans, tool, args, options.bursts)
            share = proxied / direct
            print(
                f"{'':<12} throughput with {IN_FLIGHT} in flight: direct {direct:7.0f}/s   "
                f"with proxy {proxied:7.0f}/s   {share:.1%} of direct"
            )
            results.append(verdict(f"{name}: added latency <= {LATENCY_TARGET_MS:g} ms",
                                   added <= LATENCY_TARGET_MS))  # fmt: skip
            results.append(verdict(f"{name}: throughput >= {THROUGHPUT_TARGET:.0%} of direct",
                                   share >= THROUGHPUT_TARGET))  # fmt: skip
            # The same server behind the floor relay: what the extra process costs by itself.
            run_case("  floor", server, floor, tool, args, options.rounds)
            direct, relayed = anyio.run(throughput, server, floor, tool, args, options.bursts)
            print(
                f"{'':<12} throughput with {IN_FLIGHT} in flight: direct {direct:7.0f}/s   "
                f"with floor {relayed:7.0f}/s   {relayed / direct:.1%} of direct"
            )
        run_case("echo", [sys.executable, str(echo)], spans, "echo", {"text": "x"}, options.rounds)
        run_case("  no spans", [sys.executable, str(echo)], ["--no-spans"], "echo",
                 {"text": "x"}, options.rounds)  # fmt: skip
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
    print(f"targets: {'all met' if all(results) else 'some MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
