"""An MCP server whose ``delete_item`` asks the user to confirm first (``Resolve(Elicit)``):
over MCP 2026-07-28 the first round of the call answers ``input_required`` and the client
retries the same call with the answer; in the handshake era the server asks in the call.

Run as a script it serves over stdio; :func:`build` makes one for in-process tests."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

CONTRACT = {
    "list_items": {"produces": {"items[]": "item"}},
    "delete_item": {"refs": {"item_id": "item"}, "invalidates": {"item_id": "item"}},
}
CONTRACT_TOML = (
    '[tools.list_items]\nproduces = { "items[]" = "item" }\n'
    '[tools.delete_item]\nrefs = { item_id = "item" }\ninvalidates = { item_id = "item" }\n'
)


class Confirm(BaseModel):
    ok: bool


def _ask(item_id: str) -> Any:
    return Elicit(f"Really delete {item_id}?", Confirm)


def build() -> MCPServer:
    server = MCPServer("items")
    items = {"it-1", "it-2"}

    @server.tool()
    def list_items() -> dict[str, list[str]]:
        """The items there are."""
        return {"items": sorted(items)}

    @server.tool()
    def delete_item(item_id: str, confirm: Annotated[Confirm, Resolve(_ask)]) -> str:
        """Delete an item, once the user confirms."""
        if not confirm.ok:
            return "kept"
        items.discard(item_id)
        return f"deleted {item_id}"

    return server


if __name__ == "__main__":
    anyio.run(build().run_stdio_async)
