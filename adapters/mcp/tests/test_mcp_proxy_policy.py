"""What gateway users ask for (issue 22, section 4), as contract options of the proxy: tool
filtering (``allow`` / ``deny``), tool-definition pinning (``--pin``, ``pin = "block"``) and
HTTP authentication (``--auth-token-env``), on the real mcp-server-time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import HERE, http_proxied, python_server
from raw_client import RawProxy
from test_mcp_proxy_fail_closed import call_spans

ODD = python_server(str(HERE / "odd_server.py"))
NOW = {"name": "get_current_time", "arguments": {"timezone": "UTC"}}
CONVERT = {
    "name": "convert_time",
    "arguments": {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_denied_tool_is_not_listed_and_its_calls_are_blocked_over_stdio(
    tmp_path: Path, time_server: list[str]
) -> None:
    contract = tmp_path / "time.toml"
    # Globs; deny wins over allow.
    contract.write_text('allow = ["get_*", "convert_time"]\ndeny = ["convert_*"]\n')
    proxy = RawProxy(tmp_path, time_server, "--contract", str(contract))
    proxy.initialize()
    listed = proxy.request("tools/list")["result"]["tools"]
    assert [t["name"] for t in listed] == ["get_current_time"]
    denied = proxy.request("tools/call", CONVERT)["result"]
    assert denied["isError"] and "There is no tool named `convert_time`" in text(denied)
    assert not proxy.request("tools/call", NOW)["result"].get("isError")
    assert proxy.close() == 0
    spans = call_spans(proxy.spans)
    assert [
        (s["gen_ai.tool.name"], s["toolguard.decision"], s.get("toolguard.check")) for s in spans
    ] == [
        ("convert_time", "blocked", "schema.tool"),
        ("get_current_time", "allowed", None),
    ]


@pytest.mark.anyio
async def test_a_denied_tool_is_not_listed_and_its_calls_are_blocked_over_http(
    tmp_path: Path, time_server: list[str]
) -> None:
    from mcp import Client

    contract = tmp_path / "time.toml"
    contract.write_text('deny = ["convert_time"]\n')
    proxied = http_proxied(tmp_path, time_server, "--contract", str(contract))
    async with proxied as (url, _, _), Client(url) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["get_current_time"]
        denied = await client.call_tool(CONVERT["name"], CONVERT["arguments"])
        assert denied.is_error and "no tool named `convert_time`" in denied.content[0].text


def test_pins_from_a_lock_file_flag_or_block_a_changed_tool(
    tmp_path: Path, time_server: list[str]
) -> None:
    lock = tmp_path / "tools.lock"
    first = RawProxy(tmp_path / "first", time_server, "--pin", str(lock))
    first.initialize()
    assert first.close() == 0
    pinned = json.loads(lock.read_text())
    assert sorted(pinned["tools"]) == ["convert_time", "get_current_time"]
    assert pinned["tools"]["get_current_time"]["definition"]["inputSchema"]["required"] == [
        "timezone"
    ]

    # The server's get_current_time is no longer what was pinned (a rug-pull, simulated).
    pinned["tools"]["get_current_time"]["sha256"] = "0" * 64
    lock.write_text(json.dumps(pinned))

    warned = RawProxy(tmp_path / "warn", time_server, "--pin", str(lock))
    warned.initialize()
    assert not warned.request("tools/call", NOW)["result"].get("isError")
    assert warned.close() == 0
    assert "changed since it was pinned" in warned.stderr()
    (span,) = call_spans(warned.spans)
    assert span["toolguard.mcp.tool_changed"] == "changed"

    contract = tmp_path / "block.toml"
    contract.write_text('pin = "block"\n')
    blocked = RawProxy(
        tmp_path / "block", time_server, "--pin", str(lock), "--contract", str(contract)
    )
    blocked.initialize()
    refused = blocked.request("tools/call", NOW)["result"]
    assert refused["isError"] and "changed since it was approved" in text(refused)
    assert not blocked.request("tools/call", CONVERT)["result"].get("isError")
    assert blocked.close() == 0
    spans = call_spans(blocked.spans)
    assert [(s["toolguard.decision"], s.get("toolguard.check")) for s in spans] == [
        ("blocked", "schema.pin"),
        ("allowed", None),
    ]


@pytest.mark.parametrize("pin", ["warn", "block"])
def test_a_tool_that_changes_in_the_session_is_flagged_or_refused(tmp_path: Path, pin: str) -> None:
    """No pin file: the definitions are pinned at the first tool list; the server changes
    one later (and says its list changed), the host lists again, and the change is caught."""
    contract = tmp_path / "odd.toml"
    contract.write_text(f'pin = "{pin}"\n')
    proxy = RawProxy(tmp_path, ODD, "--contract", str(contract))
    proxy.initialize()
    proxy.request("tools/list")
    assert text(proxy.request("tools/call", FINE)["result"]) == "ran fine"
    proxy.request("tools/call", {"name": "rug", "arguments": {}})
    assert {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"} in proxy.other
    described = {
        t["name"]: t["description"] for t in proxy.request("tools/list")["result"]["tools"]
    }
    assert described["fine"] == "Now also mails your files away."
    after = proxy.request("tools/call", FINE)["result"]
    if pin == "block":
        assert after["isError"] and "changed since it was approved" in text(after)
    else:
        assert text(after) == "ran fine"
    assert proxy.close() == 0
    assert "the definition of tool 'fine' changed since it was pinned" in proxy.stderr()
    first, _, last = call_spans(proxy.spans)
    assert "toolguard.mcp.tool_changed" not in first
    assert last["toolguard.mcp.tool_changed"] == "changed"
    expected = ("blocked", "schema.pin") if pin == "block" else ("allowed", None)
    assert (last["toolguard.decision"], last.get("toolguard.check")) == expected


FINE = {"name": "fine", "arguments": {"a": "x"}}


@pytest.mark.anyio
async def test_http_needs_the_bearer_token_and_spans_name_the_host(
    tmp_path: Path, time_server: list[str]
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    secret = "s3cret-token-for-the-test"
    env = {"TG_TEST_TOKEN": secret}
    # -v in log mode: a failing call is logged too, so the log holds more than the start line.
    options = ("--auth-token-env", "TG_TEST_TOKEN", "-v", "--mode", "log")
    async with http_proxied(tmp_path, time_server, *options, env=env) as (url, run, _):
        async with httpx2.AsyncClient() as plain:
            assert (await plain.post(url, json={})).status_code == 401
            assert (await plain.get(url)).status_code == 401
            assert (await plain.delete(url)).status_code == 401
            wrong = {"Authorization": "Bearer nope"}
            assert (await plain.post(url, json={}, headers=wrong)).status_code == 401
            bare = {"Authorization": secret}  # the token without the scheme
            assert (await plain.post(url, json={}, headers=bare)).status_code == 401
        headers = {"Authorization": f"Bearer {secret}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            result = await client.call_tool(NOW["name"], NOW["arguments"])
            assert not result.is_error
            odd = await client.call_tool(NOW["name"], {"timezone": "UTC", "extra": 1})
            assert not odd.is_error  # log mode: run, and its failure logged
    log = run.stderr()
    assert "serving http://" in log and "get_current_time step 2 logged" in log
    assert secret not in log
    spans = call_spans(run.spans)
    assert [s["toolguard.decision"] for s in spans] == ["allowed", "logged"]
    assert all(s["toolguard.mcp.client"].startswith("mcp") for s in spans)


def text(result: dict) -> str:
    return result["content"][0]["text"]


PAGED = python_server(str(HERE / "paged_server.py"))


def _page_through(proxy: RawProxy) -> list[str]:
    """The host reads the server's tool list page by page; the names it got."""
    first = proxy.request("tools/list")["result"]
    second = proxy.request("tools/list", {"cursor": first["nextCursor"]})["result"]
    assert "nextCursor" not in second
    return [t["name"] for t in first["tools"] + second["tools"]]


def test_a_paged_tool_list_is_pinned_whole(tmp_path: Path) -> None:
    """Without the probe the pins come from the host's list: all its pages, not the last one
    alone (which made the next run refuse the first page's tools as not pinned)."""
    contract = tmp_path / "paged.toml"
    contract.write_text('pin = "block"\n')
    lock = tmp_path / "tools.lock"
    for run in ("first", "second"):
        proxy = RawProxy(tmp_path / run, PAGED, "--contract", str(contract), "--pin", str(lock),
                         "--no-probe")  # fmt: skip
        proxy.initialize()
        assert _page_through(proxy) == ["a", "b"]
        ran = proxy.request("tools/call", {"name": "a", "arguments": {"v": "x"}})["result"]
        assert not ran.get("isError") and text(ran) == "ran a", (run, ran)
        assert proxy.close() == 0
        assert sorted(json.loads(lock.read_text())["tools"]) == ["a", "b"]
        assert "pinned" not in proxy.stderr(), proxy.stderr()


def test_a_paged_tool_list_read_by_the_host_raises_no_false_warning(tmp_path: Path) -> None:
    """The contract is checked against the whole list: the first page's tool is offered."""
    contract = tmp_path / "paged.toml"
    contract.write_text('[tools.a]\nproduces = { "$" = "thing" }\n')
    proxy = RawProxy(tmp_path, PAGED, "--contract", str(contract))
    proxy.initialize()
    assert _page_through(proxy) == ["a", "b"]
    ran = proxy.request("tools/call", {"name": "a", "arguments": {"v": "x"}})["result"]
    assert text(ran) == "ran a"
    assert proxy.close() == 0
    assert "does not offer" not in proxy.stderr(), proxy.stderr()
