"""The whole protocol over streamable HTTP (issue 22, section 2): the official Node server
``@modelcontextprotocol/server-everything`` behind ``toolguard mcp-proxy --http``, driven by
the official ``mcp`` client with sampling, elicitation and roots callbacks: what the host sees
through the proxy is what it sees talking to the server directly over stdio (capabilities,
tools, resources, prompts), and server-to-client requests, progress, logging and completions
go through; a blocked call is still blocked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import http_proxied

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Host:
    """The host's side of the server's requests, recorded."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.logs: list[Any] = []

    async def sampling(self, context: Any, params: Any) -> Any:
        from mcp import types

        self.seen.append("sampling")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled by the host"),
            model="scripted",
        )

    async def elicitation(self, context: Any, params: Any) -> Any:
        from mcp import types

        self.seen.append("elicitation")
        return types.ElicitResult(action="decline")

    async def roots(self, context: Any) -> Any:
        from mcp import types

        self.seen.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    async def logging(self, params: Any) -> None:
        self.logs.append(params)

    def client(self, target: Any) -> Any:
        from mcp import Client

        return Client(
            target,
            mode="legacy",
            cache=None,
            sampling_callback=self.sampling,
            elicitation_callback=self.elicitation,
            list_roots_callback=self.roots,
            logging_callback=self.logging,
        )


async def offered(client: Any) -> dict[str, Any]:
    caps = client.server_capabilities.model_dump(exclude_none=True)
    return {
        "capabilities": sorted(caps),
        "tools": sorted(t.name for t in (await client.list_tools()).tools),
        "resources": sorted(r.uri for r in (await client.list_resources()).resources),
        "prompts": sorted(p.name for p in (await client.list_prompts()).prompts),
    }


async def test_server_everything_over_http_as_over_stdio(
    tmp_path: Path, everything_server: list[str]
) -> None:
    from mcp import StdioServerParameters, types

    direct = StdioServerParameters(command=everything_server[0], args=everything_server[1:])
    async with Host().client(direct) as client:
        expected = await offered(client)
    assert len(expected["tools"]) >= 16 and expected["resources"] and expected["prompts"]

    host = Host()
    with anyio.fail_after(120):  # a bound against a hung test, not a measurement
        async with (
            http_proxied(tmp_path, everything_server) as (url, _run, _),
            host.client(url) as client,
        ):
            assert await offered(client) == expected

            resource = await client.read_resource(expected["resources"][0])
            assert resource.contents
            prompt = await client.get_prompt("args-prompt", {"city": "Lyon"})
            assert "Lyon" in str(prompt.messages[0].content)
            done = await client.complete(
                types.PromptReference(type="ref/prompt", name="completable-prompt"),
                {"name": "department", "value": "E"},
            )
            assert done.completion.values
            await client.set_logging_level("debug")

            sampled = await client.call_tool("trigger-sampling-request", {"prompt": "hi"})
            assert "sampled by the host" in str(sampled.content)
            await client.call_tool("trigger-elicitation-request", {})
            rooted = await client.call_tool("get-roots-list", {})
            assert "file:///work" in str(rooted.content)

            steps: list[float] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                steps.append(value)

            long = await client.call_tool(
                "trigger-long-running-operation",
                {"duration": 0.2, "steps": 2},
                progress_callback=progress,
            )
            assert not long.is_error and steps

            blocked = await client.call_tool("get-sum", {"a": 1, "b": 2, "c": 3})
            assert blocked.is_error and "rejected (schema)" in blocked.content[0].text
    assert {"sampling", "elicitation", "roots"} <= set(host.seen)
