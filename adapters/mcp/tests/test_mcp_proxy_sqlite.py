"""A third server the proxy was never shaped around: mcp-server-sqlite (PyPI), opt-in.

Its last release (2025.4.25) runs on the ``mcp`` 1.x SDK only (on 2.x it fails at import), so
it cannot share this package's environment: install it into one of its own and name its
command, e.g. ``python -m venv /tmp/sq && /tmp/sq/bin/pip install mcp-server-sqlite 'mcp<2'``
then ``MCP_SERVER_SQLITE=/tmp/sq/bin/mcp-server-sqlite``. It answers in Python reprs, not
JSON, so the contract reads the table names by regex."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raw_client import RawProxy
from test_mcp_proxy_fail_closed import call_spans

SQLITE = os.environ.get("MCP_SERVER_SQLITE")
CONTRACT = """
[tools.list_tables]
produces = { "regex:'name': '([^']+)'" = "table" }

[tools.describe_table]
refs = { table_name = "table" }
"""


@pytest.mark.skipif(not SQLITE, reason="MCP_SERVER_SQLITE names no mcp-server-sqlite command")
def test_sqlite_server_behind_the_proxy(tmp_path: Path) -> None:
    assert SQLITE is not None
    contract = tmp_path / "sqlite.toml"
    contract.write_text(CONTRACT)
    server = [SQLITE, "--db-path", str(tmp_path / "test.db")]
    proxy = RawProxy(tmp_path, server, "--contract", str(contract))
    proxy.initialize()

    def call(name: str, **arguments: str) -> dict:
        return proxy.request("tools/call", {"name": name, "arguments": arguments})["result"]

    early = call("describe_table", table_name="notes")
    assert early["isError"] and "rejected (dependency)" in early["content"][0]["text"]
    assert not call("create_table", query="CREATE TABLE notes (id INTEGER, body TEXT)")["isError"]
    assert "notes" in call("list_tables")["content"][0]["text"]
    described = call("describe_table", table_name="notes")
    assert not described["isError"] and "body" in described["content"][0]["text"]
    typo = call("read_query", sql="SELECT * FROM notes")
    assert typo["isError"] and "rejected (schema)" in typo["content"][0]["text"]
    assert proxy.request("resources/list")["result"]["resources"]  # relayed as it is
    assert proxy.close() == 0
    decisions = [(s["gen_ai.tool.name"], s["toolguard.decision"]) for s in call_spans(proxy.spans)]
    assert decisions == [
        ("describe_table", "blocked"),
        ("create_table", "allowed"),
        ("list_tables", "allowed"),
        ("describe_table", "allowed"),
        ("read_query", "blocked"),
    ]
