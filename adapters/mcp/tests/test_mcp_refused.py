"""A call the guard admitted that the MCP layer then refused before the tool ran is
``blocked`` (docs/protocol.md, section 4: not executed), in block and log mode alike; never
``logged`` (invalid, run anyway) nor ``allowed`` with a failure (run, and the environment
rejected it). Driven by the real ``mcp`` SDK on both ends: the proxy (stdio and HTTP) in
front of an ``MCPServer`` process, ``GuardedClient`` and ``guard_server`` in process."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import toolguard_mcp as tgmcp

from conftest import HERE, Telemetry, http_proxied
from raw_client import RawProxy
from test_mcp_proxy_fail_closed import call_spans
from test_mcp_server_middleware import contacts_server, text

FAKE = [sys.executable, str(HERE / "fake_server.py")]
BLOCKED = ("blocked", "schema", "schema.args")


def verdict(span: dict[str, Any]) -> tuple[Any, ...]:
    return (span["toolguard.decision"], span["toolguard.cause"], span["toolguard.check"])


def failed_checks(span: dict[str, Any]) -> list[str]:
    return [v["stringValue"] for v in span["toolguard.failed_checks"]["values"]]


def proxy_calls(
    tmp_path: Path, options: list[str], *calls: dict[str, Any]
) -> tuple[list[Any], list[Any]]:
    """The answers to ``calls`` through ``toolguard-mcp-proxy [options]`` over stdio in
    front of fake_server.py, and their call spans."""
    proxy = RawProxy(tmp_path, FAKE, *options)
    proxy.initialize()
    answers = [proxy.request("tools/call", params) for params in calls]
    assert proxy.close() == 0, proxy.stderr()
    return answers, call_spans(proxy.spans)


@pytest.mark.parametrize(
    ("mode", "arguments"),
    [("block", {"text": "a"}), ("log", {"text": "a"}), ("log", {"text": 5})],
)
def test_a_call_the_server_refuses_as_a_request_is_blocked(
    tmp_path: Path, mode: str, arguments: dict[str, Any]
) -> None:
    """A ``task`` that is no task object: the server's SDK answers -32602 (invalid params)
    before it looks at the tool. The guard admitted the call (valid, or invalid in log
    mode); it did not run."""
    params = {"name": "echo", "arguments": arguments, "task": "not a task"}
    (answer,), (span,) = proxy_calls(tmp_path, ["--mode", mode], params)
    assert answer["error"]["code"] == -32602  # the server's own answer, handed on
    assert verdict(span) == BLOCKED
    if arguments["text"] == "a":  # else the guard's own finding comes first
        assert "JSON-RPC error -32602" in span["toolguard.message"]
    assert "state.exception" not in failed_checks(span)


def test_arguments_the_servers_sdk_refuses_are_blocked_in_log_mode(tmp_path: Path) -> None:
    """Log mode lets ``echo(text=5)`` through; MCPServer refuses it against its arguments
    model and answers ``isError`` without calling the function. A tool's own error is still
    a call that ran."""
    (refused, ran), (first, second) = proxy_calls(
        tmp_path,
        ["--mode", "log"],
        {"name": "echo", "arguments": {"text": 5}},
        {"name": "echo", "arguments": {"text": "a", "extra": 1}},
    )
    assert (
        refused["result"]["isError"]
        and "validation error" in refused["result"]["content"][0]["text"]
    )
    assert verdict(first) == BLOCKED
    assert failed_checks(first) == ["schema.args"]  # the guard's own finding, once
    assert not ran["result"]["isError"]  # MCPServer ignores the extra argument: it ran
    assert second["toolguard.decision"] == "logged"


def test_arguments_the_servers_sdk_refuses_are_blocked_in_block_mode(tmp_path: Path) -> None:
    """A contract whose schema is looser than the server's: the guard admits ``text=5``, the
    server's SDK refuses it; blocked, with the check the server's refusal failed."""
    contract = tmp_path / "loose.toml"
    contract.write_text('[tools.echo]\njson_schema = { type = "object" }\n')
    (answer,), (span,) = proxy_calls(
        tmp_path, ["--contract", str(contract)], {"name": "echo", "arguments": {"text": 5}}
    )
    assert answer["result"]["isError"]
    assert verdict(span) == BLOCKED
    assert "refused the arguments of 'echo'" in span["toolguard.message"]
    assert "5" not in span["toolguard.message"]  # no argument value without the opt-in


anyio_test = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@anyio_test
async def test_over_http_arguments_the_server_refuses_are_blocked(tmp_path: Path) -> None:
    from mcp import Client

    async with (
        http_proxied(tmp_path, FAKE, "--mode", "log") as (url, run, _),
        Client(url, mode="legacy") as client,
    ):
        refused = await client.call_tool("echo", {"text": 5})
        assert refused.is_error
    (span,) = call_spans(run.spans)
    assert verdict(span) == BLOCKED, run.stderr()


@anyio_test
@pytest.mark.parametrize("mode", ["block", "log"])
async def test_the_client_sdk_refusing_to_send_a_call_blocks_it(otel: Telemetry, mode: str) -> None:
    """Arguments as JSON text: the guard reads them, the SDK cannot build the request from
    them and raises, as it does without the guard; nothing was sent."""
    from mcp import Client
    from pydantic import ValidationError

    guard = otel.guard(mode=mode)
    async with tgmcp.GuardedClient(Client(contacts_server()), guard) as client:
        with pytest.raises(ValidationError):
            await client.call_tool("search_contacts", json.dumps({"phone": "x"}))  # type: ignore[arg-type]
        if mode == "log":
            with pytest.raises(ValidationError):
                await client.call_tool("search_contacts", json.dumps({"phone": 5}))  # type: ignore[arg-type]
    spans = otel.call_spans()
    assert len(spans) == (2 if mode == "log" else 1)
    for span in spans:
        attrs = dict(span.attributes or {})
        assert verdict(attrs) == BLOCKED
        assert "cannot send the call" in str(attrs["toolguard.message"]) or mode == "log"


@anyio_test
async def test_the_client_and_the_server_middleware_block_what_the_server_refused(
    otel: Telemetry,
) -> None:
    """Log mode on both sides of one in-process session: the server's SDK refuses
    ``search_contacts(phone=5)`` after the middleware admitted it; both guards say blocked."""
    from mcp import Client

    server_guard = otel.guard(mode="log")
    server = contacts_server()
    tgmcp.guard_server(server, server_guard)
    async with tgmcp.GuardedClient(Client(server), otel.guard(mode="log")) as client:
        refused = await client.call_tool("search_contacts", {"phone": 5})
        assert refused.is_error and "validation error" in text(refused)
    spans = [dict(s.attributes or {}) for s in otel.call_spans()]
    assert len(spans) == 2  # the client's and the server's
    for attrs in spans:
        assert verdict(attrs) == BLOCKED
        assert attrs["toolguard.failed_checks"] == ("schema.args",)


def test_a_tools_own_error_is_still_a_call_that_ran() -> None:
    """What is read as the server SDK's refusal and what is not (the texts both SDKs write)."""
    from toolguard_mcp.refusals import refused_arguments, refused_code

    def result(message: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": message}], "isError": True}

    py = "Error executing tool echo: 1 validation error for echoArguments\ntext\n  Input ..."
    ts = "MCP error -32602: Input validation error: Invalid arguments for tool echo: [...]"
    assert refused_arguments("echo", result(py)) and refused_arguments("echo", result(ts))
    assert not refused_arguments("other", result(py))  # another tool's name
    for own in (
        "Error executing tool echo: the address book is read-only",
        "Error executing tool echo",
        "MCP error -32602: Output validation error: Invalid structured content for tool echo",
        "1 validation error for echoArguments\n",
    ):
        assert not refused_arguments("echo", result(own))
    assert [
        c for c in (-32700, -32600, -32601, -32602, -32603, -32000, "-32602") if refused_code(c)
    ] == [
        -32700,
        -32600,
        -32601,
        -32602,
    ]
