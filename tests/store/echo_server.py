"""A small MCP server over stdio, the second server of the store's proxy tests: ``echo``, and
``mint`` / ``redeem`` for a binding (a ticket one call produces and a later one refers to),
and ``crash``.
It keeps no state, so a ticket minted by one replica's server is redeemed by another's: only
the guard's bindings (shared through the store) say whether the ticket was seen."""

import hashlib
import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


@server.tool()
def mint(name: str) -> dict[str, str]:
    """A ticket for ``name``."""
    return {"ticket": "T-" + hashlib.sha256(name.encode()).hexdigest()[:8]}


@server.tool()
def redeem(ticket: str) -> str:
    """Redeem a ticket."""
    return f"redeemed {ticket}"


@server.tool()
def crash() -> str:
    """Exit at once, as a server that crashes does."""
    os._exit(3)


if __name__ == "__main__":
    server.run()
