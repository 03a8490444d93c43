"""A one-tool MCP server over stdio (echo), the second server of the store's proxy tests."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


if __name__ == "__main__":
    server.run()
