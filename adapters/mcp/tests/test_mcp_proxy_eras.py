"""Both protocol eras of MCP through the stdio proxy, with the official client: a host of the
2026-07-28 era (an envelope in every request, no handshake), one that negotiates (``auto``:
``server/discover``, else the handshake) and one of the handshake era each reach the server in
their own era, while the proxy still reads the server's tool list before the first call."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import HERE, proxied, python_server

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
