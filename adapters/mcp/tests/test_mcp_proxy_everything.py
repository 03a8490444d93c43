"""The whole protocol over stdio and over streamable HTTP (issue 22, section 2): the official
Node server ``@modelcontextprotocol/server-everything`` behind ``toolguard mcp-proxy`` (and
``--http``), driven by the official ``mcp`` client with sampling, elicitation and roots
callbacks. What the host sees through the proxy is what it sees talking to the server
directly over stdio (capabilities, tools, resources, prompts); server-to-client requests,
progress, logging and completions go through, and so do notifications not tied to a request
(log messages, a subscription's resource updates); a blocked call is still blocked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import EVERYTHING_PACKAGE, PROXY, _node_server, _pythonpath, http_proxied

pytestmark = [
    pytest.mark.anyio,
    # Logging and subscriptions are deprecated in the 2026-07-28 era, relayed in the handshake era.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Host:
    """The host's side of the server's requests, recorded."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.logs: list[Any] = []
        self.updated: list[str] = []  # resources/updated notifications, by URI
        self.logged = anyio.Event()
        self.told = anyio.Event()

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
        self.logged.set()

    async def messages(self, message: Any) -> None:
        """Notifications not tied to a request (the server sends them on the GET stream)."""
        note = getattr(message, "root", message)
        if getattr(note, "method", None) == "notifications/resources/updated":
            self.updated.append(str(note.params.uri))
            self.told.set()

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
            message_handler=self.messages,
        )


async def offered(client: Any) -> dict[str, Any]:
    caps = client.server_capabilities.model_dump(exclude_none=True)
    return {
        "capabilities": sorted(caps),
        "tools": sorted(t.name for t in (await client.list_tools()).tools),
        "resources": sorted(r.uri for r in (await client.list_resources()).resources),
        "prompts": sorted(p.name for p in (await client.list_prompts()).prompts),
    }


@pytest.fixture(scope="module")
def direct(_npm_install: Any) -> tuple[list[str], dict[str, Any]]:
    """The server's command line, and what it offers a host talking to it directly over
    stdio (read once for the module)."""
    from mcp import StdioServerParameters

    server = [*_node_server(_npm_install, EVERYTHING_PACKAGE), "stdio"]

    async def read() -> dict[str, Any]:
        async with Host().client(StdioServerParameters(command=server[0], args=server[1:])) as c:
            return await offered(c)

    expected = anyio.run(read)
    assert len(expected["tools"]) >= 16 and expected["resources"] and expected["prompts"]
    return server, expected


@asynccontextmanager
async def through_proxy(transport: str, tmp_path: Path, server: list[str]) -> AsyncIterator[Any]:
    """What a host connects to: the proxy over stdio (its subprocess) or over HTTP (its URL)."""
    if transport == "http":
        async with http_proxied(tmp_path, server) as (url, _run, _):
            yield url
        return
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(PROXY),
        args=["--spans", str(tmp_path / "spans.jsonl"), "--", *server],
        env={"PYTHONUNBUFFERED": "1", **_pythonpath()},
        cwd=str(tmp_path),
    )
    with (tmp_path / "proxy.log").open("w") as log:
        yield stdio_client(params, errlog=log)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_server_everything_through_the_proxy_as_directly(
    tmp_path: Path, direct: tuple[list[str], dict[str, Any]], transport: str
) -> None:
    from mcp import types

    server, expected = direct
    host = Host()
    with anyio.fail_after(120):  # a bound against a hung test, not a measurement
        async with (
            through_proxy(transport, tmp_path, server) as target,
            host.client(target) as client,
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
            # The server logs once at once, then every 5 s: the first message is awaited
            # (a bound against a hung test), the second call stops it.
            await client.call_tool("toggle-simulated-logging", {})
            with anyio.fail_after(60):
                await host.logged.wait()
            await client.call_tool("toggle-simulated-logging", {})
            # A subscription's updates come on no request's stream: the session's GET stream.
            watched = expected["resources"][0]
            await client.subscribe_resource(watched)
            await client.call_tool("toggle-subscriber-updates", {})
            with anyio.fail_after(60):
                await host.told.wait()
            assert host.updated[0] == watched
            await client.call_tool("toggle-subscriber-updates", {})
            await client.unsubscribe_resource(watched)

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
