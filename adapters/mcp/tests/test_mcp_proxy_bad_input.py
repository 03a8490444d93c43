"""Bad input for ``toolguard mcp-proxy``: a malformed contract file, malformed arguments, a
server that crashes in the middle of a session and one that never answers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import toolguard as tg

import toolguard_mcp.proxy as proxy

from conftest import EXAMPLES, HERE, proxied, python_server, report_of

FAKE = python_server(str(HERE / "fake_server.py"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def call_spans(path: Path) -> list[dict]:
    """The call spans of a span file, by step."""
    calls = [s for s in spans_of(path) if "toolguard.step" in s]
    return sorted(calls, key=lambda s: s["toolguard.step"])


def spans_of(path: Path) -> list[dict]:
    import json

    out = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    attrs = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
                    out.append({"name": span["name"], **attrs})
    return out


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("[tools.git_show]\nrefs = { revision = 7 }\n", ["'git_show'", "'refs'"]),
        ("[tools.git_show]\nrequires = { revision = 'commit' }\n", ["'git_show'", "'requires'"]),
        ("[tools.git_log]\nproduces = { 'regex:([0-9a-f' = 'commit' }\n",
         ["'git_log'", "'produces'", "regular expression"]),
        ("[tools.git_commit]\npreconditions = [{ id = 'clean', predicate = 'no_such_module:f' }]\n",
         ["'git_commit'", "'preconditions'", "no_such_module"]),
    ],
)  # fmt: skip
def test_a_malformed_contract_stops_the_proxy_naming_file_tool_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, names: list[str]
) -> None:
    contract = tmp_path / "broken.toml"
    contract.write_text(text)
    status = proxy.main(["--contract", str(contract), "--", sys.executable, "-c", "pass"])
    assert status == 2
    err = capsys.readouterr().err
    for name in [str(contract), *names]:
        assert name in err, err


@pytest.mark.parametrize("name", ["git.toml", "memory.toml"])
def test_the_shipped_contracts_load(name: str) -> None:
    contract = tg.load_contract(EXAMPLES / name)
    assert contract.mode == "block" and contract.tools


def test_the_http_proxy_binds_loopback_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        proxy.main(["--http", "0.0.0.0:8765", "--", sys.executable, "-c", "pass"])
    assert "loopback" in capsys.readouterr().err


def test_a_port_out_of_range_or_in_use_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with pytest.raises(SystemExit) as info:
        proxy.main(["--http", "127.0.0.1:99999", "--", sys.executable, "-c", "pass"])
    assert info.value.code == 2 and "a port 0-65535" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        for extra in ([], ["--replica", "--store", "memory"]):
            argv = ["--http", f"127.0.0.1:{port}", *extra, "--", sys.executable, "-c", "pass"]
            with pytest.raises(SystemExit) as info:
                proxy.main(argv)
            err = capsys.readouterr().err
            assert info.value.code == 2 and "cannot listen there" in err and "Traceback" not in err


@pytest.mark.anyio
async def test_malformed_arguments_then_a_server_crash(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    async with proxied(tmp_path, FAKE, mode="legacy") as (client, run):
        ok = await client.call_tool("echo", {"text": "hi"})
        assert not ok.is_error and ok.content[0].text == "hi"
        bad = await client.call_tool("echo", {"text": 5})
        assert bad.is_error and "rejected (schema)" in bad.content[0].text
        with pytest.raises(MCPError) as info:
            await client.call_tool("crash", {})
        assert "exited (code 3)" in info.value.error.message
    assert "the MCP server exited with code 3" in run.stderr()

    # No span lost: every call and the summary reached the file before the proxy exited.
    calls = call_spans(run.spans)
    assert [
        (s["gen_ai.tool.name"], s["toolguard.decision"], s.get("toolguard.cause")) for s in calls
    ] == [
        ("echo", "allowed", None),
        ("echo", "blocked", "schema"),
        ("crash", "allowed", "state_consistency"),
    ]
    (record,) = report_of(run.spans)[0]
    assert (record.length, record.fed, record.first_error_cause) == (3, 2, "schema")
    assert not record.incomplete


@pytest.mark.anyio
async def test_calls_in_flight_time_out_each_at_its_own_deadline(tmp_path: Path) -> None:
    """One timer serves every call's timeout (relay_host._expire_due): two calls that never
    answer, started apart, both time out, and a call answered meanwhile is not touched."""
    results: dict[str, Any] = {}

    async def call(key: str, tool: str, args: dict[str, Any]) -> None:
        results[key] = await client.call_tool(tool, args)

    async with proxied(tmp_path, FAKE, "--timeout", "1") as (client, run):
        async with anyio.create_task_group() as group:
            group.start_soon(call, "first", "hang", {})
            await anyio.sleep(0.6)  # a later deadline for the second: the timer is set again
            group.start_soon(call, "second", "hang", {})
            group.start_soon(call, "echo", "echo", {"text": "meanwhile"})
        assert (await client.call_tool("echo", {"text": "after"})).content[0].text == "after"
    for key in ("first", "second"):
        assert results[key].is_error
        assert "did not answer within 1 s" in results[key].content[0].text
    assert results["echo"].content[0].text == "meanwhile"
    decisions = sorted(
        (s["gen_ai.tool.name"], s["toolguard.decision"]) for s in call_spans(run.spans)
    )
    assert decisions == [
        ("echo", "allowed"),
        ("echo", "allowed"),
        ("hang", "cancelled"),
        ("hang", "cancelled"),
    ]


@pytest.mark.anyio
async def test_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    async with proxied(tmp_path, FAKE, "--timeout", "0.5") as (client, run):
        late = await client.call_tool("hang", {})
        assert late.is_error
        assert "did not answer within 0.5 s" in late.content[0].text
        # The proxy and the server go on serving.
        assert (await client.call_tool("echo", {"text": "still here"})).content[0].text == (
            "still here"
        )
        # A tool the server does not offer: the server answers it its own way; one more step.
        unknown = await client.call_tool("nope", {})
        assert unknown.is_error
    calls = call_spans(run.spans)
    assert [(s["gen_ai.tool.name"], s["toolguard.decision"]) for s in calls] == [
        ("hang", "cancelled"),
        ("echo", "allowed"),
        ("nope", "blocked"),
    ]
    (record,) = report_of(run.spans)[0]
    # Cancelled is not invalid; the unknown tool is the first error.
    assert (record.length, record.fed, record.first_error_cause) == (3, 3, "schema")


def test_an_id_reused_after_a_timeout_gets_its_answer(tmp_path: Path) -> None:
    """MCP forbids reusing a request id, but a host that reuses the id of a call that timed
    out must still get the new request's answer (a call, or any other request): the id is no
    longer the expired call's."""
    from raw_client import RawProxy

    proxy = RawProxy(tmp_path, FAKE, "--timeout", "0.5")
    proxy.initialize()
    again = {50: ("tools/call", {"name": "echo", "arguments": {"text": "hi"}}), 51: ("ping", {})}
    for rid, (method, params) in again.items():
        hang = {"name": "hang", "arguments": {}}
        proxy.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": hang})
        late = proxy.read()
        assert late["id"] == rid and "did not answer within" in late["result"]["content"][0]["text"]
        proxy.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        answer = proxy.read()
        assert answer["id"] == rid and "error" not in answer, answer
        said = answer["result"].get("content", [{"text": ""}])[0]["text"]
        assert said == ("hi" if method == "tools/call" else "")
    assert proxy.close() == 0


@pytest.mark.parametrize(
    "meta",
    [
        {"traceparent": 5},
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": 5},
        {"traceparent": ["00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"]},
    ],
)
def test_a_trace_context_that_is_no_text_is_not_read(tmp_path: Path, meta: dict) -> None:
    """A host's `_meta.traceparent` (or tracestate) that is not a string made the
    propagator raise out of the relay: the proxy exited and no call was answered. It is
    left unread now (telemetry never breaks a call), and the connection goes on."""
    from raw_client import RawProxy

    proxy = RawProxy(tmp_path, FAKE)
    proxy.initialize()
    for rid, text, extra in ((1, "x", {"_meta": meta}), (2, "y", {})):
        params = {"name": "echo", "arguments": {"text": text}, **extra}
        proxy.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
        answer = proxy.read()
        assert answer["id"] == rid and answer["result"]["content"][0]["text"] == text, answer
    assert proxy.close() == 0
