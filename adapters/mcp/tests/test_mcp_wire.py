"""Properties of the proxy's strict reading of host messages (toolguard_mcp.wire), over
generated messages: reading never raises, and nothing shaped like a tools/call passes the
check unless its id and params are what MCP allows (so the guard checks every call that is
forwarded)."""

from __future__ import annotations

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
