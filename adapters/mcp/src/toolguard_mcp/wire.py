"""What the stdio proxy accepts from the host, decided before anything reaches the server.

Fail closed: a message the proxy cannot fully parse (invalid UTF-8, a lone surrogate escape,
``NaN``, ``Infinity``), a request whose id the MCP specification does not allow
(``7.0``, ``1e0``, ``null``, ``true``, an object), or a ``tools/call`` whose ``params`` are
not the shape MCP defines is answered here with a JSON-RPC error and never forwarded. What is
forwarded is the message as the proxy parsed it, serialized again, so the server reads exactly
what was checked (no second parser can read a duplicate key or an odd number another way).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from . import _meta

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
OWN_ID_PREFIX = "toolguard-mcp-proxy/"  # ids of the proxy's own requests to the server
_EDGE = 4096  # bytes kept from each end of an oversized line, to find its id


@dataclass(slots=True)
class Refusal:
    """A host message answered with a JSON-RPC error instead of being forwarded. ``call``:
    (tool name, ``_meta``) when it was a ``tools/call``, recorded as a rejected step."""

    code: int
    message: str
    id: str | int | None = None
    call: tuple[str, Any] | None = None

    def answer(self) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": self.code, "message": self.message},
        }


@dataclass(slots=True)
class Oversized:
    """A line longer than the limit, read to its end and dropped; ``id`` when one was found."""

    size: int
    id: str | int | None


def valid_id(value: Any) -> bool:
    """A request id as MCP allows it: a string or an integer (never null, a bool, a float)."""
    return type(value) is str or type(value) is int


def parse(line: bytes) -> Any:
    """The message on ``line``, or a :class:`Refusal` (-32700) when it is not strict JSON."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        rid, call = _salvage(line)
        # orjson's reason names a position and a kind of fault, never the text itself.
        return Refusal(PARSE_ERROR, f"Parse error: {str(exc)[:200]}", rid, call)


def check(msg: Any) -> Refusal | None:
    """None when ``msg`` (one parsed message, not a batch) may go on to the server."""
    if not isinstance(msg, dict):
        return Refusal(INVALID_REQUEST, "Invalid Request: a JSON-RPC message is an object")
    rid = msg.get("id")
    has_id = "id" in msg
    answer_id = rid if valid_id(rid) else None
    if msg.get("jsonrpc") != "2.0":
        return Refusal(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', answer_id)
    if "method" not in msg:  # a response to a request of the server
        if not valid_id(rid) or ("result" in msg) == ("error" in msg):
            return Refusal(
                INVALID_REQUEST,
                "Invalid Request: a response needs a string or integer id and one of result, error",
            )
        return None
    method = msg["method"]
    tool_call = method == "tools/call"
    if not isinstance(method, str):
        return Refusal(INVALID_REQUEST, 'Invalid Request: "method" must be a string', answer_id)
    if has_id and not valid_id(rid):
        return Refusal(
            INVALID_REQUEST,
            f"Invalid Request: MCP request ids are strings or integers (not {_kind(rid)})",
            None,
            _call_of(msg) if tool_call else None,
        )
    if has_id and isinstance(rid, str) and rid.startswith(OWN_ID_PREFIX):
        return Refusal(
            INVALID_REQUEST, f"Invalid Request: ids starting {OWN_ID_PREFIX!r} are the proxy's"
        )
    params = msg.get("params")
    if "params" in msg and not isinstance(params, dict):
        return Refusal(INVALID_REQUEST, 'Invalid Request: "params" must be an object', answer_id)
    if not tool_call:
        return None
    if not has_id:
        return Refusal(
            INVALID_REQUEST, "Invalid Request: tools/call needs an id", None, _call_of(msg)
        )
    problem = _call_problem(params)
    if problem is not None:
        return Refusal(INVALID_PARAMS, f"Invalid params: {problem}", answer_id, _call_of(msg))
    return None


def _call_problem(params: Any) -> str | None:
    if not isinstance(params, dict):
        return "tools/call needs params"
    if not isinstance(params.get("name"), str):
        return "tools/call needs a tool name (a string)"
    if "arguments" in params and not isinstance(params["arguments"], dict | None):
        return "tools/call arguments must be an object"
    if "_meta" in params and not isinstance(params["_meta"], dict | None):
        return "_meta must be an object"
    return None


def _call_of(msg: Mapping[str, Any]) -> tuple[str, Any]:
    params = msg.get("params")
    params = params if isinstance(params, Mapping) else {}
    name = params.get("name")
    return (_printable(name) if isinstance(name, str) else "<no name>", params.get("_meta"))


def _salvage(line: bytes) -> tuple[str | int | None, tuple[str, Any] | None]:
    """Read an unparseable line leniently (surrogates kept, ``NaN`` taken) only to answer its
    id and record the call it meant; nothing read here is ever forwarded."""
    try:
        msg = json.loads(line.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(msg, dict):
        return None, None
    rid = msg.get("id")
    rid = rid if valid_id(rid) and rid == _printable(rid) else None
    if msg.get("method") != "tools/call":
        return rid, None
    name, meta = _call_of(msg)
    traj_id, step, call_id = _meta.carried(meta)
    clean = {
        k: v
        for k, v in (
            (_meta.TRAJECTORY_ID, traj_id and _printable(traj_id)),
            (_meta.STEP, step),
            (_meta.CALL_ID, call_id and _printable(call_id)),
        )
        if v is not None
    }
    return rid, (name, clean)


def _printable(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a number with a fraction or exponent"
    return "an array" if isinstance(value, list) else "an object"


# -- reading lines with a bound ------------------------------------------------------------------
_HEAD_ID = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"[^"\\]{0,256}")')
_TAIL_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"[^"\\]{0,256}")\s*\}\s*$')


class LineSplitter:
    """Cuts a byte stream into lines as its chunks arrive: every complete line of a chunk at
    once (so a burst of messages is handled, and answered, in one go), each with its newline.
    A line longer than ``limit`` (not counting the newline) is read to its newline and comes
    out as :class:`Oversized`, never cut into messages; only its ends are kept meanwhile."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._partial = bytearray()  # the start of a line whose newline has not come yet
        self._over: tuple[bytes, bytes, int] | None = None  # head, tail, size of a long line

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        lines: list[bytes | Oversized] = []
        start, size = 0, len(data)
        while start < size:
            end = data.find(b"\n", start)
            stop = size if end < 0 else end + 1
            if self._over is not None:
                head, tail, length = self._over
                self._over = (head, (tail + data[start:stop])[-_EDGE:], length + stop - start)
                if end >= 0:
                    lines.append(self._oversized())
            elif end < 0:
                self._partial += data[start:]
                if len(self._partial) > self.limit:
                    whole = bytes(self._partial)
                    self._partial.clear()
                    self._over = (whole[:_EDGE], whole[-_EDGE:], len(whole))
            else:
                line = data[start:stop]
                if self._partial:
                    line = bytes(self._partial) + line
                    self._partial.clear()
                if len(line) - 1 > self.limit:
                    lines.append(Oversized(len(line), _edge_id(line[:_EDGE], line[-_EDGE:])))
                else:
                    lines.append(line)
            start = stop
        return lines

    def end(self) -> bytes | Oversized | None:
        """At the end of the stream: the last line when it had no newline, else None."""
        if self._over is not None:
            return self._oversized()
        if not self._partial:
            return None
        line = bytes(self._partial)
        self._partial.clear()
        return line

    def _oversized(self) -> Oversized:
        assert self._over is not None
        head, tail, length = self._over
        self._over = None
        return Oversized(length, _edge_id(head, tail))


def _edge_id(head: bytes, tail: bytes) -> str | int | None:
    """The id of an oversized message where serializers put it: first after ``jsonrpc`` (the
    Python SDK) or last (the TypeScript SDK)."""
    found = _HEAD_ID.match(head) or _TAIL_ID.search(tail)
    if found is None:
        return None
    try:
        rid = orjson.loads(found.group(1))
    except orjson.JSONDecodeError:
        return None
    return rid if valid_id(rid) else None
