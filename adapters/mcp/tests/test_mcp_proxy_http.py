"""``toolguard mcp-proxy --http``: the same guard over streamable HTTP on the loopback
interface, one server process per host session: a crash ends its session only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import HERE, http_proxied, report_of
from test_mcp_proxy_fail_closed import call_spans

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


async def test_http_refuses_what_it_cannot_parse_strictly(
    tmp_path: Path, time_server: list[str]
) -> None:
    """The SDK's parser would take ``NaN`` or ``7.0`` leniently: the proxy refuses them at the
    door, as over stdio, and records the refused call."""
    import httpx2

    head = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    call = (
        b'{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": '
        b'"get_current_time", "arguments": {"timezone": "UTC"}%s}}'
    )
    # A generous read timeout: a new session starts its server first (a bound, not a measurement).
    async with (
        http_proxied(tmp_path, time_server) as (url, run, _),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        opened = await http.post(url, headers=head, json=hello)
        session = {
            **head,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(url, headers=session, json=note)
        for rid, extra, code in (
            (b"5", b', "_meta": {"x": NaN}', -32700),
            (b"6", b', "_meta": {"x": "\\ud800"}', -32700),
            (b"7.0", b"", -32600),
        ):
            refused = await http.post(url, headers=session, content=call % (rid, extra))
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == code
        ran = await http.post(url, headers=session, content=call % (b"8", b""))
        assert ran.status_code == 200 and '"id":8' in ran.text and "UTC" in ran.text
    decisions = [(s["toolguard.decision"], s.get("toolguard.check")) for s in call_spans(run.spans)]
    assert decisions == [("blocked", "schema.jsonrpc")] * 3 + [("allowed", None)]
