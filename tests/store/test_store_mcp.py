"""MCP proxies sharing one Redis store (``toolguard mcp-proxy --store redis://...``):

- two proxies for two different servers (mcp-server-time and a small echo server) in one
  episode: one summary with the episode's T and FED, where each proxy alone wrote its own
  (and the report's figures were wrong);
- a proxy killed mid-episode: the next proxy continues the trajectory's steps and writes
  its summary.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import toolguard as tg
from toolguard import _contract as contract

pytest.importorskip("toolguard_mcp", reason="the MCP adapter (adapters/mcp) is not installed")
pytest.importorskip("mcp_server_time", reason="mcp-server-time is in the MCP adapter's [test]")

pytestmark = pytest.mark.anyio

PROXY = Path(sys.executable).parent / "toolguard-mcp-proxy"
TIME = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
ECHO = [sys.executable, str(Path(__file__).with_name("echo_server.py"))]
META_ID = "toolguard/trajectory_id"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextmanager
def http_proxy(spans: Path, server: list[str], *options: str) -> Iterator[tuple[str, Any]]:
    """``toolguard-mcp-proxy --http 127.0.0.1:0 --spans FILE [options] -- server``: its URL
    (from the line it logs once listening) and its process; SIGTERM at the end."""
    proc = subprocess.Popen(
        [str(PROXY), "--http", "127.0.0.1:0", "--spans", str(spans), *options, "--", *server],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stderr is not None
        seen = ""
        for line in proc.stderr:  # ends when the proxy exits: no wait without a bound
            seen += line
            found = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp)", line)
            if found:
                break
        assert found, seen
        yield found.group(1), proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(60)


async def call(url: str, name: str, arguments: dict[str, Any], episode: str) -> Any:
    from mcp import Client

    async with Client(url, mode="legacy") as client:
        return await client.call_tool(name, arguments, meta={META_ID: episode})


def spans_in(*paths: Path) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        for line in path.read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        attrs = {
                            a["key"]: next(iter(a["value"].values())) for a in span["attributes"]
                        }
                        out.append({"name": span["name"], **attrs})
    return out


def report(*paths: Path) -> dict[str, Any]:
    records, _ = tg.read_records([str(p) for p in paths])
    return dict(tg.build_report(records)["overall"])


@pytest.mark.parametrize("shared", [True, False], ids=["store", "no-store"])
async def test_two_proxies_for_two_servers_in_one_episode(
    redis_url: str, tmp_path: Path, shared: bool
) -> None:
    store = ["--store", redis_url] if shared else []
    time_spans, echo_spans = tmp_path / "time.jsonl", tmp_path / "echo.jsonl"
    with (
        http_proxy(time_spans, TIME, *store) as (time_url, _),
        http_proxy(echo_spans, ECHO, *store) as (echo_url, _),
    ):
        ok = await call(time_url, "get_current_time", {"timezone": "UTC"}, "ep-1")
        assert not ok.is_error
        assert not (await call(echo_url, "echo", {"text": "hi"}, "ep-1")).is_error
        bad = await call(time_url, "get_current_time", {"zone": "UTC"}, "ep-1")
        assert bad.is_error and "rejected (schema)" in bad.content[0].text
        assert not (await call(echo_url, "echo", {"text": "bye"}, "ep-1")).is_error
    spans = spans_in(time_spans, echo_spans)
    summaries = [s for s in spans if s["name"] == contract.SUMMARY_SPAN_NAME]
    figures = report(time_spans, echo_spans)
    if not shared:  # each proxy alone: two summaries of one id, and figures the report guesses
        assert len(summaries) == 2
        return
    assert len(summaries) == 1
    assert int(summaries[0][contract.TRAJECTORY_LENGTH]) == 4
    assert int(summaries[0][contract.TRAJECTORY_FED]) == 3
    steps = sorted(int(s[contract.STEP]) for s in spans if contract.STEP in s)
    assert steps == [1, 2, 3, 4]
    assert (figures["n"], figures["ter"], figures["mean_fed"]) == (1, 0.0, 3.0)
    assert figures["causes"]["schema"] == 1
    assert figures["disagreements"] == 0 and figures["incomplete"] == 0


async def test_a_killed_proxy_is_continued_by_the_next(redis_url: str, tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    with http_proxy(first, ECHO, "--store", redis_url) as (url, proc):
        for text in ("one", "two"):
            assert not (await call(url, "echo", {"text": text}, "ep-k")).is_error
        bad = await call(url, "echo", {"txt": "typo"}, "ep-k")  # step 3, blocked
        assert bad.is_error
        proc.send_signal(signal.SIGKILL)  # no summary, no goodbye
        proc.wait(60)
    with http_proxy(second, ECHO, "--store", redis_url) as (url, _):
        for text in ("four", "five"):
            assert not (await call(url, "echo", {"text": text}, "ep-k")).is_error
    spans = spans_in(second) + (spans_in(first) if first.exists() else [])
    summaries = [s for s in spans if s["name"] == contract.SUMMARY_SPAN_NAME]
    assert len(summaries) == 1
    # The second proxy took steps 4 and 5: the killed one's record was in the store.
    assert sorted(int(s[contract.STEP]) for s in spans_in(second) if contract.STEP in s) == [4, 5]
    assert int(summaries[0][contract.TRAJECTORY_LENGTH]) == 5
    assert int(summaries[0][contract.TRAJECTORY_FED]) == 3


def test_a_bad_store_url_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(PROXY), "--store", "mem://x", "--no-spans", "--", *ECHO],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "--store: 'mem://x' is no trajectory store" in proc.stderr
