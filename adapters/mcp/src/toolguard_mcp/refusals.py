"""Calls the guard admitted that the MCP layer then refused before the tool ran: the client
SDK could not build the request, the server answered it with a JSON-RPC error that refuses
the request itself, or the server's SDK refused the arguments against the tool's
``inputSchema`` (its answer then has ``isError``, as a failed tool's does).

Such a call did not run, so it is closed as ``blocked`` (docs/protocol.md, section 4), in
block and log mode alike: log mode lets an invalid call run, and this one did not. Closed
as a finish or a failure it read ``logged`` (log mode) or ``allowed`` with a
``state_consistency`` failure (a call the server ran and rejected).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeGuard

import toolguard as tg

# JSON-RPC 2.0's codes for a request refused as a request: unparseable, not a request, no
# such method, invalid params. A server answers a call it started with a result (isError)
# or with an error of its own (-32603 and the server-defined codes), which may come after
# the tool did something: those stay failures of a call that ran.
REFUSED_CODES = frozenset({-32700, -32600, -32601, -32602})
_INVALID_PARAMS = -32602


def refused_code(code: Any) -> TypeGuard[int]:
    """Whether a JSON-RPC error code says the server refused the request before running it."""
    return type(code) is int and code in REFUSED_CODES


def error_code(exc: BaseException) -> int | None:
    """The JSON-RPC error code of an SDK's ``MCPError`` (the server's answer), else None."""
    from mcp.shared.exceptions import MCPError

    return exc.error.code if isinstance(exc, MCPError) else None


def refused_arguments(name: str, result: Any) -> bool:
    """Whether an ``isError`` result is the server SDK's own refusal of the arguments, the
    tool never called: the Python SDK's ``MCPServer`` (its arguments model, named after the
    function, failed to validate) or the TypeScript SDK's ``McpServer`` (the input schema's
    parse failed). A tool's own error would have to quote them word for word."""
    text = _first_text(result)
    if text is None:
        return False
    if text.startswith(f"{_TS_PREFIX}Invalid arguments for tool {name}: "):
        return True
    opening = f"Error executing tool {name}: "
    return text.startswith(opening) and _PYDANTIC.match(text, len(opening)) is not None


# McpError's text: "MCP error <code>: <message>"; McpServer.validateToolInput's message.
_TS_PREFIX = f"MCP error {_INVALID_PARAMS}: Input validation error: "
# pydantic's ValidationError text: "1 validation error for echoArguments\n..." (the model
# FuncMetadata builds for the tool's function is "<function name>Arguments").
_PYDANTIC = re.compile(r"\d+ validation errors? for \w+Arguments\n")


def reject(pending: tg.PendingCall, why: str, *, check: str = "schema.args") -> tg.Rejection:
    """Close ``pending`` as blocked, cause ``schema``: ``why`` names what refused it and
    holds no argument value (it goes on the span)."""
    text = f"{why}; the tool did not run"
    return pending.reject(tg.Failure("schema", check, text, text, telemetry_message=text))


def reject_code(pending: tg.PendingCall, code: int) -> tg.Rejection:
    """Close ``pending``, which the server answered with the refusing error ``code``."""
    return reject(
        pending,
        f"the server refused the call to {pending.name[:128]!r} with JSON-RPC error {code}",
        check="schema.args" if code == _INVALID_PARAMS else "schema.jsonrpc",
    )


def reject_arguments(pending: tg.PendingCall, by: str = "the server") -> tg.Rejection:
    return reject(
        pending, f"{by} refused the arguments of {pending.name[:128]!r} against its input schema"
    )


def _first_text(result: Any) -> str | None:
    blocks = result.get("content") if isinstance(result, Mapping) else None
    if blocks is None and not isinstance(result, Mapping):
        blocks = getattr(result, "content", None)
    if not isinstance(blocks, list | tuple) or not blocks:
        return None
    block = blocks[0]
    text = block.get("text") if isinstance(block, Mapping) else getattr(block, "text", None)
    return text if isinstance(text, str) else None
