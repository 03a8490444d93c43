"""Contract files that are wrong in every way the loader can meet: a ContractFileError naming
the file (and the tool and key where there is one), never another exception."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolguard as tg
from toolguard.runtime.contract_file import ContractFileError, load_contract


def _load(tmp_path: Path, text: str | bytes) -> tg.Contract:
    path = tmp_path / "c.toml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return load_contract(path)


@pytest.mark.parametrize(
    "text",
    ["a = " + "[" * 5000 + "]" * 5000, "a = " + "{b = " * 3000 + "1" + "}" * 3000],
)
def test_nesting_deeper_than_the_stack_is_a_contract_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(ContractFileError, match="nested deeper than Python's stack"):
        _load(tmp_path, text)


@pytest.mark.parametrize(
    ("table", "key", "why"),
    [
        ("description = 5", "description", "must be a string"),
        (
            'preconditions = [{ id = "a", predicate = "os:getcwd", message = 5 }]',
            "preconditions",
            "condition 'a': message must be a string, not 5",
        ),
        (
            'json_schema = { "$ref" = "#/nope" }',
            "json_schema",
            "$ref '#/nope' does not resolve within the schema",
        ),
        (
            'json_schema = { properties = { a = { "$ref" = "https://x.example/s" } } }',
            "json_schema",
            "$ref 'https://x.example/s' does not resolve within the schema (toolguard fetches",
        ),
    ],
)
def test_a_wrong_value_is_named_with_its_tool_and_key(
    tmp_path: Path, table: str, key: str, why: str
) -> None:
    with pytest.raises(ContractFileError) as err:
        _load(tmp_path, f"[tools.t]\n{table}\n")
    assert f"c.toml: tool 't', key {key!r}: {why}" in str(err.value)


def test_refs_that_resolve_within_the_schema_load(tmp_path: Path) -> None:
    contract = _load(
        tmp_path,
        '[tools.t]\njson_schema = { type = "object", "$defs" = { id = { type = "string" } }, '
        'properties = { a = { "$ref" = "#/$defs/id" }, b = { const = { "$ref" = "#/no" } } } }\n',
    )
    assert contract.tools["t"].json_schema is not None


def test_a_byte_order_mark_is_said(tmp_path: Path) -> None:
    with pytest.raises(ContractFileError, match="starts with a byte order mark"):
        _load(tmp_path, '\ufeffmode = "log"\n')


# TOML documents of contract keys, with values of every type and shape.
_KEYS = st.sampled_from(
    [
        "mode",
        "null_as_default",
        "tools",
        "initial",
        "description",
        "json_schema",
        "refs",
        "produces",
        "invalidates",
        "grounded",
        "preconditions",
        "postconditions",
        "strict",
        "id",
        "predicate",
        "message",
        "$ref",
        "type",
        "properties",
        "regex:(",
        "regex:a",
        "",
        "a.b",
        "x[]",
        "unknown",
    ]
)
_SCALARS = st.one_of(
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["block", "log", "os:getcwd", "os:sep", "no_such_mod_zz:f", ":", "#/x"]),
    st.text(max_size=8),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


def _toml_key(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _toml_key(value).encode("ascii", "backslashreplace").decode().replace("\\x", "\\u00")
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items()) + "}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    top=st.dictionaries(st.sampled_from(["mode", "null_as_default", "initial", "x"]), _VALUES),
    tools=st.dictionaries(st.text(max_size=5), st.dictionaries(_KEYS, _VALUES, max_size=5)),
    raw=st.binary(max_size=40),
)
def test_any_contract_file_loads_or_is_a_contract_error(
    top: dict[str, object], tools: dict[str, dict[str, object]], raw: bytes
) -> None:
    lines = [f"{_toml_key(k)} = {_toml(v)}" for k, v in top.items()]
    for name, table in tools.items():
        lines.append(f"[tools.{_toml_key(name)}]")
        lines += [f"{_toml_key(k)} = {_toml(v)}" for k, v in table.items()]
    document = "\n".join(lines).encode()
    with tempfile.TemporaryDirectory() as folder:
        for text in (document, raw + document, document[: len(document) // 2]):
            path = Path(folder) / "c.toml"
            path.write_bytes(text)
            try:
                load_contract(path)
            except ContractFileError as exc:
                assert str(exc).startswith(str(path))
