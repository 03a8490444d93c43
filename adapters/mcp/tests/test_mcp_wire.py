"""Properties of the proxy's strict reading of host messages (toolguard_mcp.wire), over
generated messages: reading never raises, and nothing shaped like a tools/call passes the
check unless its id and params are what MCP allows (so the guard checks every call that is
forwarded)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard_mcp import wire

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
ids = st.one_of(
    scalars,
    st.lists(scalars, max_size=2),
    st.dictionaries(st.text(max_size=3), scalars, max_size=2),
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0", 2])},
    optional={
        "id": ids,
        "method": st.sampled_from(["tools/call", "tools/list", "ping", 5]),
        "params": st.one_of(
            values,
            st.fixed_dictionaries(
                {"name": st.one_of(st.text(max_size=5), scalars)},
                optional={"arguments": values, "_meta": values},
            ),
        ),
        "result": values,
    },
)


@settings(max_examples=200, deadline=None)
@given(messages)
def test_a_tools_call_passes_only_when_the_guard_can_check_it(msg: dict[str, Any]) -> None:
    refusal = wire.check(msg)
    if refusal is not None:
        assert refusal.code in (wire.INVALID_REQUEST, wire.INVALID_PARAMS)
        assert refusal.id is None or wire.valid_id(refusal.id)
        json.dumps(refusal.answer(), allow_nan=False)  # the answer itself is valid JSON
        return
    assert msg["jsonrpc"] == "2.0"
    if msg.get("method") == "tools/call":
        assert type(msg["id"]) in (str, int)
        assert isinstance(msg["params"]["name"], str)
        assert isinstance(msg["params"].get("arguments", {}), dict | None)
        assert isinstance(msg["params"].get("_meta", {}), dict | None)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | values.map(lambda v: json.dumps(v).encode()))
def test_reading_any_bytes_never_raises(line: bytes) -> None:
    parsed = wire.parse(line)
    if isinstance(parsed, wire.Refusal):
        assert parsed.code == wire.PARSE_ERROR
        assert parsed.id is None or wire.valid_id(parsed.id)
    elif not isinstance(parsed, list):
        wire.check(parsed)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    st.booleans(),
    st.lists(st.integers(min_value=0), max_size=10),
    st.integers(min_value=1, max_value=24),
)
def test_lines_come_out_whole_however_the_stream_is_cut(
    bodies: list[bytes], last_open: bool, cuts: list[int], limit: int
) -> None:
    """The relay reads pipes chunk by chunk: every line comes out once and whole, with its
    newline, in order; one past the limit comes out as Oversized with its true size (never
    cut into messages); a last line without a newline comes out at the end."""
    data = b"".join(b + b"\n" for b in bodies)
    if last_open:
        data += b'{"id": 7}'
    splitter = wire.LineSplitter(limit)
    out: list[bytes | wire.Oversized] = []
    for chunk in _cut(data, cuts):
        out.extend(splitter.feed(chunk))
    last = splitter.end()
    if last is not None:
        out.append(last)
    expected: list[bytes | wire.Oversized] = []
    for line in [b + b"\n" for b in bodies] + ([b'{"id": 7}'] if last_open else []):
        content = len(line) - line.endswith(b"\n")
        if content > limit:
            found = out[len(expected)] if len(out) > len(expected) else None
            assert isinstance(found, wire.Oversized), (line, found)
            assert found.size == len(line)
            expected.append(found)
        else:
            expected.append(line)
    assert out == expected


def test_an_oversized_line_keeps_the_id_at_either_end() -> None:
    splitter = wire.LineSplitter(64)
    head = b'{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"x":"' + b"a" * 9000
    tail = b"b" * 9000 + b'"},"jsonrpc":"2.0","id":"last"}\n'
    lines = splitter.feed(head) + splitter.feed(b"c" * 100_000) + splitter.feed(tail + b"{}\n")
    assert len(lines) == 2 and lines[1] == b"{}\n"
    first = lines[0]
    assert isinstance(first, wire.Oversized)
    assert first.size == len(head) + 100_000 + len(tail)
    assert first.id == 41
