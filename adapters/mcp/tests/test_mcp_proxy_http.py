"""``toolguard mcp-proxy --http``: the same guard over streamable HTTP on the loopback
interface, one server process per host session: a crash ends its session only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import HERE, http_proxied, report_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_http_proxy_one_span_per_call_and_a_crash_ends_one_session(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    async with http_proxied(tmp_path, [sys.executable, str(HERE / "fake_server.py")]) as (
        url,
        run,
        proc,
    ):
        async with Client(url, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"echo", "crash", "hang", "big"}
            ok = await client.call_tool("echo", {"text": "over http"})
            assert ok.content[0].text == "over http"
            bad = await client.call_tool("echo", {"txt": "typo"})
            assert bad.is_error and "rejected (schema)" in bad.content[0].text
            with pytest.raises(MCPError) as info:
                await client.call_tool("crash", {})
            assert "exited (code 3)" in info.value.error.message
        # The crash ended that session and its server only: a new session has a new server.
        async with Client(url, mode="legacy") as client:
            again = await client.call_tool("echo", {"text": "still serving"})
            assert again.content[0].text == "still serving"
    assert proc.returncode == 0

    names = []
    for line in run.spans.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    keys = {a["key"] for a in span["attributes"]}
                    names.append((span["name"], "toolguard.step" in keys))
    call_spans = [name for name, is_call in names if is_call]
    assert call_spans == [
        "execute_tool echo",
        "execute_tool echo",
        "execute_tool crash",
        "execute_tool echo",
    ]
    first, second = sorted(report_of(run.spans)[0], key=lambda r: -r.length)
    assert (first.length, first.fed, first.first_error_cause) == (3, 2, "schema")
    assert (second.length, second.fed) == (1, 2)
