"""A Node server from the npm registry behind the proxy: the official knowledge-graph server
``@modelcontextprotocol/server-memory``, installed into a temporary folder for the session.
It speaks the handshake-era protocol, so the host falls back to ``initialize``."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import EXAMPLES, proxied, report_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_node_memory_server_behind_the_proxy(
    tmp_path: Path, memory_server: list[str]
) -> None:
    env = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    contract = str(EXAMPLES / "memory.toml")
    async with proxied(tmp_path, memory_server, "--contract", contract, env=env) as (client, run):
        note = {"observations": [{"entityName": "Ana", "contents": ["prefers tea"]}]}
        early = await client.call_tool("add_observations", note)
        assert early.is_error and "rejected (dependency)" in early.content[0].text

        created = await client.call_tool(
            "create_entities",
            {"entities": [{"name": "Ana", "entityType": "person", "observations": []}]},
        )
        assert not created.is_error
        assert created.structured_content["entities"][0]["name"] == "Ana"
        assert not (await client.call_tool("add_observations", note)).is_error
        assert not (await client.call_tool("delete_entities", {"entityNames": ["Ana"]})).is_error
        stale = await client.call_tool("open_nodes", {"names": ["Ana"]})
        assert stale.is_error
        assert "invalidated" in stale.content[0].text  # deleted: a stale entity, not unknown

    (record,) = report_of(run.spans)[0]
    assert (record.length, record.fed, record.first_error_cause) == (5, 1, "dependency")
    assert not record.incomplete
