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
    """One server crash ends its own session only, and says so: the call in flight gets an error
    naming the exit, a later request of that session a 404 saying why; a session open beside
    it goes on, the next session starts a new server, and when the upstream is gone (the
    server exits at start, or cannot be started) the host's ``initialize`` is answered saying
    so; once it is back, sessions work again."""
    import httpx2
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    gone = tmp_path / "gone"
    launcher = tmp_path / "server.sh"  # made unrunnable below: the server cannot be started
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "fake_server.py"}"\n')
    launcher.chmod(0o755)
    env = {"FAKE_SERVER_GONE": str(gone)}
    async with http_proxied(tmp_path, [str(launcher)], env=env) as (url, run, proc):
        async with Client(url, mode="legacy") as client, Client(url, mode="legacy") as other:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"echo", "crash", "hang", "big"}
            ok = await client.call_tool("echo", {"text": "over http"})
            assert ok.content[0].text == "over http"
            bad = await client.call_tool("echo", {"txt": "typo"})
            assert bad.is_error and "rejected (schema)" in bad.content[0].text
            with pytest.raises(MCPError) as info:
                await client.call_tool("crash", {})
            assert "exited (code 3)" in info.value.error.message
            with pytest.raises(MCPError) as info:
                await client.call_tool("echo", {"text": "too late"})
            late = info.value.error.message
            assert late.startswith("Session not found: the MCP server behind toolguard-mcp-proxy")
            assert "exited (code 3); start a new session" in late
            # The other session, open all along, has a server of its own: it goes on.
            alive = await other.call_tool("echo", {"text": "unaffected"})
            assert alive.content[0].text == "unaffected"
        # The crash ended that session and its server only: a new session has a new server.
        async with Client(url, mode="legacy") as client:
            again = await client.call_tool("echo", {"text": "still serving"})
            assert again.content[0].text == "still serving"

        gone.touch()  # the server now exits at once: the upstream is gone
        with pytest.raises(ExceptionGroup) as group:
            async with Client(url, mode="legacy") as client:
                pass
        (error,) = _leaves(group.value)
        assert isinstance(error, MCPError), error
        assert error.error.message == (
            "the MCP server behind toolguard-mcp-proxy exited (code 4) before answering "
            "initialize; this session is over: start a new one"
        )
        launcher.chmod(0o644)  # cannot be started at all
        async with httpx2.AsyncClient(timeout=60) as http:
            refused = await http.post(url, headers=HEAD, json=HELLO)
        assert refused.status_code == 502
        assert "could not start the MCP server" in refused.json()["error"]["message"]

        gone.unlink()  # back: the next session is served again
        launcher.chmod(0o755)
        async with Client(url, mode="legacy") as client:
            back = await client.call_tool("echo", {"text": "back"})
            assert back.content[0].text == "back"
    assert proc.returncode == 0
    log = run.stderr()
    assert "Traceback" not in log, log
    assert log.count("is over: its server exited") == 2, log  # the crash, the server gone

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
        "execute_tool echo",
        "execute_tool echo",
    ]
    first, *rest = sorted(report_of(run.spans)[0], key=lambda r: -r.length)
    assert (first.length, first.fed, first.first_error_cause) == (3, 2, "schema")
    assert [(r.length, r.fed) for r in rest] == [(1, 2)] * 3


def _leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in _leaves(inner)]
    return [group]


HEAD = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


async def test_http_refuses_what_it_cannot_parse_strictly(
    tmp_path: Path, time_server: list[str]
) -> None:
    """The SDK's parser would take ``NaN`` or ``7.0`` leniently: the proxy refuses them at the
    door, as over stdio, and records the refused call. A batch is refused whole (each request
    in it answered with an error, ``[]`` with one, its calls recorded), and a body over
    ``--max-message-mib`` is refused, the session going on."""
    import httpx2

    call = (
        b'{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": '
        b'"get_current_time", "arguments": {"timezone": "UTC"}%s}}'
    )
    # A generous read timeout: a new session starts its server first (a bound, not a measurement).
    async with (
        http_proxied(tmp_path, time_server, "--max-message-mib", "1") as (url, run, _),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        opened = await http.post(url, headers=HEAD, json=HELLO)
        session = {
            **HEAD,
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
        calls = (call % (b"9", b""), call % (b'"ten"', b""))
        batch = b"[%s, %s, %s]" % (*calls, json.dumps(note).encode())
        answers = (await http.post(url, headers=session, content=batch)).json()
        assert [(a["id"], a["error"]["code"]) for a in answers] == [(9, -32600), ("ten", -32600)]
        assert "not a batch" in answers[0]["error"]["message"]
        empty = await http.post(url, headers=session, content=b"[]")
        assert empty.status_code == 400
        assert empty.json()["error"] == {"code": -32600, "message": "Invalid Request: empty batch"}
        huge = call % (b"11", b', "_meta": {"pad": "%s"}' % (b"x" * (1024 * 1024)))
        over = await http.post(url, headers=session, content=huge)
        assert over.status_code == 400 and "over the limit" in over.json()["error"]["message"]
        ran = await http.post(url, headers=session, content=call % (b"8", b""))
        assert ran.status_code == 200 and '"id":8' in ran.text and "UTC" in ran.text
    decisions = [(s["toolguard.decision"], s.get("toolguard.check")) for s in call_spans(run.spans)]
    assert decisions == [("blocked", "schema.jsonrpc")] * 5 + [("allowed", None)]
