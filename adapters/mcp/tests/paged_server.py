"""A raw JSON-RPC MCP server whose tool list comes in two pages (``a``, then ``b`` after the
cursor ``p2``); every call it runs is answered ``ran NAME``. Over stdio, one message a line."""

import json
import sys


def tool(name):
    schema = {"type": "object", "properties": {"v": {"type": "string"}}}
    return {"name": name, "description": f"Tool {name}.", "inputSchema": schema}


PAGES = {None: ([tool("a")], "p2"), "p2": ([tool("b")], None)}


def answer(msg):
    method, params = msg["method"], msg.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "paged", "version": "1"},
        }
    if method == "tools/list":
        tools, cursor = PAGES[params.get("cursor")]
        return {"tools": tools, **({"nextCursor": cursor} if cursor else {})}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": f"ran {params['name']}"}]}
    return {}


for line in sys.stdin:
    msg = json.loads(line)
    if "id" in msg and "method" in msg:
        out = {"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
