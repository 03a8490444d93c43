"""``toolguard mcp-proxy`` fails closed (issue 22, section 1), on the real mcp-server-time and
a raw JSON-RPC client: a message the proxy cannot parse and check whole, a request id the
specification does not allow, a batch, a message over the size limit. Whether a call reached
the server is read from the answer: the server answers a call it ran with a result, the
proxy a refusal with an error; a ``ping`` right after shows nothing else is on its way."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import HERE, python_server
from raw_client import RawProxy

TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
LEGAL = {"name": "get_current_time", "arguments": {"timezone": "UTC"}}
ILLEGAL = {"name": "get_current_time", "arguments": {"timezone": "UTC", "extra": 1}}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawProxy]:
    """One proxy session for the module (each test uses ids of its own): starting the
    server costs about a second; the tests that read spans start their own."""
    pytest.importorskip("mcp_server_time", reason="mcp-server-time is in the [test] extra")
    run = RawProxy(tmp_path_factory.mktemp("proxy"), TIME_SERVER)
    run.initialize()
    yield run
    if run.process.poll() is None:
        run.close()


def call_line(rid: str, params: dict[str, Any], meta: str = "") -> bytes:
    """A tools/call line with ``rid`` and ``meta`` spliced in as raw JSON text."""
    body = json.dumps(params)[:-1]
    if meta:
        body += f', "_meta": {meta}'
    return f'{{"jsonrpc": "2.0", "id": {rid}, "method": "tools/call", "params": {body}}}}}'.encode()


def assert_nothing_else_comes(proxy: RawProxy) -> None:
    """A ping answered next: no answer of the server to the refused message is in between."""
    proxy.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
    assert proxy.read() == {"jsonrpc": "2.0", "id": "after", "result": {}}


def call_spans(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    attrs = {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
                    if "toolguard.step" in attrs:
                        out.append(attrs)
    return sorted(out, key=lambda a: int(a["toolguard.step"]))


def test_a_legal_call_runs(proxy: RawProxy) -> None:
    answer = proxy.request("tools/call", LEGAL)
    assert not answer["result"].get("isError") and "UTC" in answer["result"]["content"][0]["text"]


UNPARSEABLE = [
    call_line("5", LEGAL, '{"note": NaN}'),
    call_line("6", {"name": "get_current_time", "arguments": {"timezone": "UTC", "n": 1}}).replace(
        b'"n": 1', b'"n": Infinity'
    ),
    call_line("7", LEGAL, '{"note": "\\ud800"}'),  # a lone surrogate escape
    call_line("8", LEGAL, '{"note": "cafX"}').replace(b"cafX", b"caf\xe9"),  # invalid UTF-8
    # One naming its trajectory and step: recorded there.
    call_line("9", LEGAL, '{"toolguard/trajectory_id": "task-7", "toolguard/step": 4, "n": NaN}'),
]


def test_an_unparseable_call_is_refused_and_recorded(
    tmp_path: Path, time_server: list[str]
) -> None:
    proxy = RawProxy(tmp_path, time_server)
    proxy.initialize()
    for rid, line in enumerate(UNPARSEABLE, start=5):
        proxy.send(line)
        answer = proxy.read()
        assert answer["id"] == rid and answer["error"]["code"] == -32700, line
        assert_nothing_else_comes(proxy)
    assert proxy.close() == 0
    spans = call_spans(proxy.spans)
    assert [(s["toolguard.decision"], s["toolguard.check"]) for s in spans] == [
        ("blocked", "schema.jsonrpc")
    ] * len(UNPARSEABLE)
    named = [s for s in spans if s["toolguard.trajectory.id"] == "task-7"]
    assert [int(s["toolguard.step"]) for s in named] == [4]
    assert len({s["toolguard.trajectory.id"] for s in spans}) == 2  # the session's, task-7


@pytest.mark.parametrize("rid", ["7.0", "1e0", "null", "1.5", '{"a": 1}', "[1]", "true"])
def test_no_id_form_bypasses_the_guard(proxy: RawProxy, rid: str) -> None:
    proxy.send(call_line(rid, ILLEGAL))
    answer = proxy.read()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert_nothing_else_comes(proxy)
    # The same call with an id the specification allows is blocked by the guard.
    proxy.send(call_line('"ok"', ILLEGAL))
    blocked = proxy.read()
    assert blocked["id"] == "ok" and blocked["result"]["isError"]
    assert "rejected (schema)" in blocked["result"]["content"][0]["text"]


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"name": 5}, -32602),
        ({"name": "get_current_time", "arguments": '{"timezone": "UTC"}'}, -32602),
        ({"name": "get_current_time", "arguments": {"timezone": "UTC"}, "_meta": [1]}, -32602),
    ],
)
def test_malformed_params_are_refused(proxy: RawProxy, params: dict[str, Any], code: int) -> None:
    proxy.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
    assert proxy.read()["error"]["code"] == code
    assert_nothing_else_comes(proxy)


def test_a_tools_call_notification_is_refused(proxy: RawProxy) -> None:
    proxy.send({"jsonrpc": "2.0", "method": "tools/call", "params": LEGAL})
    assert proxy.read()["error"]["code"] == -32600
    assert_nothing_else_comes(proxy)


def test_batches_are_answered_as_the_spec_says(proxy: RawProxy) -> None:
    proxy.send(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ILLEGAL},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": LEGAL},
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
            7,
        ]
    )
    answers = proxy.read()
    assert isinstance(answers, list) and len(answers) == 3
    by_id = {a["id"]: a for a in answers}
    assert by_id[1]["result"]["isError"]  # blocked here
    assert not by_id[2]["result"].get("isError")  # ran on the server
    assert by_id[None]["error"]["code"] == -32600  # the 7
    proxy.send(b"[]")
    assert proxy.read() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid Request: empty batch"},
    }
    proxy.send([{"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}])
    assert_nothing_else_comes(proxy)  # a batch of notifications has no answer


def test_a_message_over_the_limit_is_refused_not_a_crash(proxy: RawProxy) -> None:
    huge = "x" * (64 * 1024 * 1024 + 10)
    params = {"name": "get_current_time", "arguments": {"timezone": huge}}
    proxy.send({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": params})
    answer = proxy.read()
    assert answer["id"] == 11 and answer["error"]["code"] == -32600
    assert "over toolguard-mcp-proxy's limit" in answer["error"]["message"]
    assert_nothing_else_comes(proxy)
    assert not proxy.request("tools/call", LEGAL)["result"].get("isError")
    assert "Traceback" not in proxy.stderr()


def test_a_server_answer_over_the_limit_is_an_error_for_its_call(tmp_path: Path) -> None:
    """Under the limit a large message goes through whole, both ways; over it, the server's
    answer is an error for its call (a raised --max-message-mib relays what a server sends)."""
    mib = 1024 * 1024
    proxy = RawProxy(
        tmp_path, python_server(str(HERE / "fake_server.py")), "--max-message-mib", "2"
    )
    proxy.initialize()
    answer = proxy.request("tools/call", {"name": "big", "arguments": {"size": 3 * mib}})
    assert "over toolguard-mcp-proxy's limit" in answer["error"]["message"]
    # The SDK's server answers the text twice (content, structuredContent): 1.6 MiB each way.
    large = proxy.request("tools/call", {"name": "big", "arguments": {"size": 800 * 1024}})
    assert large["result"]["content"][0]["text"] == "x" * (800 * 1024)
    sent = "y" * (800 * 1024)
    echoed = proxy.request("tools/call", {"name": "echo", "arguments": {"text": sent}})
    assert echoed["result"]["content"][0]["text"] == sent
    assert proxy.close() == 0
    assert [s["toolguard.decision"] for s in call_spans(proxy.spans)] == ["allowed"] * 3
