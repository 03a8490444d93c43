"""A small MCP server that misbehaves on request, for the proxy's bad-input tests.

``echo`` answers; ``crash`` kills the process in the middle of the call; ``hang`` never
answers: it waits on an event nobody sets (no sleep anywhere); ``big`` answers ``size``
bytes of text. With ``FAKE_SERVER_GONE`` naming a file that exists, it exits at once with
code 4 instead (the upstream gone, for the HTTP proxy's new sessions).
"""

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("fake")


@server.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


@server.tool()
def crash() -> str:
    """Die without answering."""
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Wait forever."""
    await anyio.Event().wait()
    return "unreachable"


@server.tool()
def big(size: int) -> str:
    """A long answer."""
    return "x" * size


if __name__ == "__main__":
    gone = os.environ.get("FAKE_SERVER_GONE")
    if gone and os.path.exists(gone):
        sys.exit(4)
    anyio.run(server.run_stdio_async)
