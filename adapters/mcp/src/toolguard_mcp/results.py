"""What a contract reads from an MCP tool result, and the results the guard answers with.

Works on both shapes a result takes: the SDK's ``CallToolResult`` model and its wire form
(a JSON object with ``content``, ``structuredContent``, ``isError``), which is what server
middleware and the stdio relay see.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.types import CallToolResult


def result_value(result: Any) -> Any:
    """The value ``produces``, postconditions and the information check read.

    ``structuredContent`` when the tool returned one; otherwise the text of its content
    blocks (an embedded text resource counts), each parsed as JSON when it is a JSON object
    or array (servers that answer in JSON text), else kept as text for ``regex:`` places.
    One block gives its value, several a list. Images and audio carry nothing to read.
    """
    if isinstance(result, Mapping):
        structured = result.get("structuredContent")
        blocks = result.get("content")
    else:
        structured = getattr(result, "structured_content", None)
        blocks = getattr(result, "content", None)
    if structured is not None:
        return structured
    values = [_block_value(b) for b in blocks or ()]
    values = [v for v in values if v is not None]
    return values[0] if len(values) == 1 else values


def is_error(result: Any) -> bool:
    if isinstance(result, Mapping):
        return result.get("isError") is True
    return bool(getattr(result, "is_error", False))


def _block_value(block: Any) -> Any:
    if isinstance(block, Mapping):
        kind = block.get("type")
        text = block.get("text") if kind == "text" else None
        resource = block.get("resource") if kind == "resource" else None
        if isinstance(resource, Mapping):
            text = resource.get("text")
    else:
        kind = getattr(block, "type", None)
        text = getattr(block, "text", None) if kind == "text" else None
        if kind == "resource":
            text = getattr(getattr(block, "resource", None), "text", None)
    if not isinstance(text, str):
        return None
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text


def error_result(text: str) -> dict[str, Any]:
    """A tool result with ``isError``: how MCP hands a failed call to the model."""
    # resultType is what the SDK always writes; peers of earlier revisions ignore it.
    return {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}


def error_model(text: str) -> CallToolResult:
    """:func:`error_result` as the SDK's ``CallToolResult``."""
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
