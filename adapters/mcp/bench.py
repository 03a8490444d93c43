"""Latency ``toolguard mcp-proxy`` adds to a ``tools/call`` round trip over stdio.

The same server twice, from one ``mcp`` client process: once directly, once behind the proxy
(with the shipped git contract and its span file, as a user runs it). Calls alternate between
the two in every round (the order flips each round), all in one run, after a warm-up. Prints
the medians, the added latency (median with minus median without) and the ratio, for
mcp-server-git's ``git_status`` (the target: < 1 ms added, <= 10% of the server's own round
trip) and for an ``echo`` tool that does nothing, which shows the relay's own cost.

    .venv/bin/python adapters/mcp/bench.py [--rounds 400]
"""

from __future__ import annotations

import argparse
import os
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


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "b@example.com"],
                 ["config", "user.name", "Bench"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=repo, check=True)
    for name in ("a.txt", "b.txt"):
        (repo / name).write_text(name)
        subprocess.run(["git", "add", name], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-q", "-m", name], cwd=repo, check=True)
    return repo


def proxy_cpu_seconds() -> float | None:
    """CPU time (user + system) of this process's toolguard-mcp-proxy children, from /proc:
    what the proxy itself spends, whatever the scheduler adds on a busy machine."""
    total, found = 0.0, False
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == os.getpid() and b"toolguard-mcp-proxy" in cmdline:
            total += (int(fields[11]) + int(fields[12])) / ticks
            found = True
    return total if found else None


async def measure(
    server: list[str], proxy_args: list[str], tool: str, args: dict[str, Any], rounds: int
) -> tuple[list[float], list[float], float | None]:
    from mcp import Client, StdioServerParameters

    direct = StdioServerParameters(command=server[0], args=server[1:])
    proxied = StdioServerParameters(command=str(PROXY), args=[*proxy_args, "--", *server])
    async with Client(direct, cache=None) as a, Client(proxied, cache=None) as b:
        for client in (a, b):
            for _ in range(30):  # warm-up: imports, caches, the guard's first declarations
                result = await client.call_tool(tool, args)
                assert not result.is_error, result
        without: list[float] = []
        with_proxy: list[float] = []
        cpu_before = proxy_cpu_seconds()
        for i in range(rounds):
            order = ((a, without), (b, with_proxy)) if i % 2 else ((b, with_proxy), (a, without))
            for client, times in order:
                start = time.perf_counter()
                await client.call_tool(tool, args)
                times.append(time.perf_counter() - start)
        cpu_after = proxy_cpu_seconds()
    cpu = None
    if cpu_before is not None and cpu_after is not None:
        cpu = (cpu_after - cpu_before) / rounds
    return without, with_proxy, cpu


def run_case(
    name: str, server: list[str], proxy_args: list[str], tool: str, args: dict[str, Any],
    rounds: int,
) -> tuple[float, float]:  # fmt: skip
    without, with_proxy, cpu = anyio.run(measure, server, proxy_args, tool, args, rounds)
    return summary(name, without, with_proxy, cpu)


def summary(
    name: str, without: list[float], with_proxy: list[float], cpu: float | None
) -> tuple[float, float]:
    m0, m1 = statistics.median(without) * 1e3, statistics.median(with_proxy) * 1e3
    added, ratio = m1 - m0, m1 / m0
    paired = statistics.median(b - a for a, b in zip(without, with_proxy, strict=True)) * 1e3
    spent = f"   proxy CPU {cpu * 1e3:.3f} ms/call" if cpu is not None else ""
    print(
        f"{name:<11} without {m0:7.3f} ms   with proxy {m1:7.3f} ms   added {added:+.3f} ms "
        f"(paired median {paired:+.3f} ms)   ratio {ratio:.3f}{spent}   n={len(without)}"
    )
    return added, ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=400)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = make_repo(root)
        echo = root / "echo_server.py"
        echo.write_text(ECHO_SERVER)
        spans = ["--spans", str(root / "spans.jsonl")]
        contract = ["--contract", str(HERE / "examples" / "git.toml")]
        git_server = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
        status = ("git_status", {"repo_path": str(repo)})
        echo_server = [sys.executable, str(echo)]
        print(
            f"tools/call round trip over stdio, {options.rounds} interleaved rounds each; "
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        )
        added, ratio = run_case(
            "git_status", git_server, [*contract, *spans], *status, options.rounds
        )
        run_case("  no spans", git_server, [*contract, "--no-spans"], *status, options.rounds)
        run_case("echo", echo_server, spans, "echo", {"text": "x"}, options.rounds)
        run_case("  no spans", echo_server, ["--no-spans"], "echo", {"text": "x"}, options.rounds)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
    met = added < 1.0 and ratio <= 1.10
    print(f"target (git_status: < 1 ms added, ratio <= 1.10): {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
