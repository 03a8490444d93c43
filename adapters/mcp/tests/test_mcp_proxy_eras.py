"""Both protocol eras of MCP through the stdio proxy, with the official client: a host of the
2026-07-28 era (an envelope in every request, no handshake), one that negotiates (``auto``:
``server/discover``, else the handshake) and one of the handshake era each reach the server in
their own era, while the proxy still reads the server's tool list before the first call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import HERE, proxied, python_server
from test_mcp_proxy_fail_closed import call_spans

pytestmark = pytest.mark.anyio

FAKE = python_server(str(HERE / "fake_server.py"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("mode", "era"),
    [("2026-07-28", "2026-07-28"), ("auto", "2026-07-28"), ("legacy", "2025-11-25")],
)
async def test_each_era_is_served_with_the_probe(tmp_path: Path, mode: str, era: str) -> None:
    """The probe waits for the host's first request and lists the tools in its era: an
    ``initialize`` of the proxy's own would fix the server's connection in the handshake era
    before the host spoke, and refuse a 2026-07-28 host every request."""
    contract = tmp_path / "fake.toml"
    contract.write_text("[tools.echo]\n[tools.frobnicate]\n")  # a tool the server lacks
    async with proxied(tmp_path, FAKE, "--contract", str(contract), mode=mode) as (client, run):
        assert client.protocol_version == era
        result = await client.call_tool("echo", {"text": "hi"})
        assert not result.is_error, result
        assert result.content[0].text == "hi"  # type: ignore[union-attr]
        # The contract was checked against the probe's list, before any list of the host's.
        assert "'frobnicate', which the server does not offer" in run.stderr()


@pytest.mark.parametrize("options", [(), ("--no-probe",)], ids=["probed", "no-probe"])
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_a_call_that_asks_the_user_first_is_one_step(
    tmp_path: Path, mode: str, options: tuple[str, ...]
) -> None:
    """MCP 2026-07-28: the server answers the call's first round ``input_required`` and the
    client retries it with the user's answer, under a new id. One step: the round is
    cancelled, not finished, so its ``invalidates`` does not block the retry."""
    from confirm_server import CONTRACT_TOML
    from mcp.types import ElicitResult

    async def confirm(ctx: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"ok": True})

    contract = tmp_path / "items.toml"
    contract.write_text(CONTRACT_TOML)
    server = python_server(str(HERE / "confirm_server.py"))
    async with proxied(
        tmp_path, server, "--contract", str(contract), *options, mode=mode,
        elicitation_callback=confirm,
    ) as (client, _run):  # fmt: skip
        await client.call_tool("list_items", {})
        deleted = await client.call_tool("delete_item", {"item_id": "it-1"})
        assert not deleted.is_error, deleted
        assert deleted.content[0].text == "deleted it-1"  # type: ignore[union-attr]
    spans = call_spans(_run.spans)
    closed = [(int(s["toolguard.step"]), s["toolguard.decision"]) for s in spans]
    rounds = 1 if mode == "legacy" else 2  # the handshake era asks within the one request
    assert closed == [(1, "allowed"), *[(2, "cancelled")] * (rounds - 1), (2, "allowed")]
