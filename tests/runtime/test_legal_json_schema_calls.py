"""Tools declared by JSON Schema (``json_schema=``, as the Agents SDK and MCP adapters
declare them): every call ``jsonschema`` accepts runs, strict by default, and the tool gets
the arguments unchanged (the decoded JSON, or the very values passed), through the three
entry points. Schemas are random: ``$ref``/``$defs``, ``anyOf``/``oneOf``/``allOf``, nullable
types, ``additionalProperties``, formats, patterns, enums and consts of mixed types,
integer vs number, big ints, unicode keys, and properties declared in subschemas."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from legal_calls import same

import toolguard as tg

Node = tuple[dict[str, Any], st.SearchStrategy[Any]]  # a schema and its valid values

_keys = st.sampled_from(["a", "b", "id", "ключ", "名前", "a b", "$x", "e\u0301"])
_big = st.sampled_from([0, 1, -1, 2**53 + 1, 10**30, -(10**30)])
_json_scalar = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4)
)


@st.composite
def _integer(draw: st.DrawFn) -> Node:
    lo, hi = sorted([draw(_big), draw(_big)])
    schema: dict[str, Any] = {"type": "integer"}
    if draw(st.booleans()):
        schema["minimum"] = lo
    if draw(st.booleans()):
        schema["maximum"] = hi
    return schema, st.integers(schema.get("minimum"), schema.get("maximum"))


@st.composite
def _number(draw: st.DrawFn) -> Node:
    schema: dict[str, Any] = {"type": "number"}
    if draw(st.booleans()):
        schema["minimum"] = draw(st.sampled_from([0, -1.5, 10**20]))
    lo = schema.get("minimum")
    floats = st.floats(min_value=lo, allow_nan=False, allow_infinity=False)
    return schema, floats | st.integers(min_value=None if lo is None else int(lo) + 1)


_PATTERNS = {"^[a-z]+$": "[a-z]+", "^\\d{3}-\\d{2}$": "[0-9]{3}-[0-9]{2}", "x": "x[a-z]*"}


@st.composite
def _string(draw: st.DrawFn) -> Node:
    schema: dict[str, Any] = {"type": "string"}
    kind = draw(st.sampled_from(["plain", "length", "pattern", "format"]))
    if kind == "length":
        schema.update(minLength=1, maxLength=3)
        return schema, st.text(min_size=1, max_size=3)
    if kind == "pattern":
        pattern = draw(st.sampled_from(sorted(_PATTERNS)))
        schema["pattern"] = pattern
        return schema, st.from_regex(f"\\A{_PATTERNS[pattern]}\\Z")
    if kind == "format":
        # Formats assert nothing unless a format checker is asked for: any string is valid.
        schema["format"] = draw(st.sampled_from(["email", "date-time", "uuid", "uri"]))
    return schema, st.text(max_size=5)


def _leaf() -> st.SearchStrategy[Node]:
    simple: list[Node] = [
        ({"type": "boolean"}, st.booleans()),
        ({"type": "null"}, st.none()),
        ({"type": ["string", "null"]}, st.none() | st.text(max_size=3)),
        ({}, _json_scalar),
        (
            {"enum": [1, "1", 1.5, None, [1], {"k": 1}]},
            st.sampled_from([1, "1", 1.5, None, [1], {"k": 1}]),
        ),
        ({"enum": ["x", "y"]}, st.sampled_from(["x", "y"])),
        ({"const": 10**25}, st.just(10**25)),
    ]
    return st.sampled_from(simple) | _integer() | _number() | _string()


def _extend(inner: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    @st.composite
    def array(draw: st.DrawFn) -> Node:
        items, values = draw(inner)
        return {"type": "array", "items": items, "maxItems": 3}, st.lists(values, max_size=3)

    @st.composite
    def nullable(draw: st.DrawFn) -> Node:
        sub, values = draw(inner)
        return {"anyOf": [sub, {"type": "null"}]}, st.none() | values

    # Disjoint branches: exactly one matches.
    one_of = st.just(
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, st.integers() | st.text(max_size=3))
    )

    @st.composite
    def obj(draw: st.DrawFn) -> Node:
        return draw(_object(inner))

    return array() | nullable() | one_of | obj()


_values = st.recursive(_leaf(), _extend, max_leaves=4)


@st.composite
def _object(draw: st.DrawFn, inner: st.SearchStrategy[Node], root: bool = False) -> Node:
    names = draw(st.lists(_keys, max_size=4, unique=True))
    subs = [draw(inner) for _ in names]
    required = [n for n in names if draw(st.booleans())]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": dict(zip(names, [s for s, _ in subs], strict=True)),
    }
    if required:
        schema["required"] = required
    extra = draw(st.sampled_from(["absent", True, False, "schema"]))
    extra_values: st.SearchStrategy[Any] | None = None
    if extra == "schema":
        schema["additionalProperties"] = {"type": "integer"}
        extra_values = st.integers()
    elif extra is not True and extra != "absent":
        schema["additionalProperties"] = False
    elif extra is True:
        schema["additionalProperties"] = True
        extra_values = _json_scalar
    elif not root:
        extra_values = _json_scalar  # inside arguments, absent means any extra is fine
    strategies = dict(zip(names, [v for _, v in subs], strict=True))

    @st.composite
    def value(d: st.DrawFn) -> dict[str, Any]:
        out = {n: d(strategies[n]) for n in names if n in required or d(st.booleans())}
        if extra_values is not None:
            extras = d(st.dictionaries(st.sampled_from(["zz", "ω"]), extra_values, max_size=1))
            out.update({k: v for k, v in extras.items() if k not in out and k not in names})
        return out

    return schema, value()


@st.composite
def _tool_schema(draw: st.DrawFn) -> Node:
    schema, values = draw(_object(_values, root=True))
    shape = draw(st.sampled_from(["plain", "defs", "allOf", "anyOf", "ifthen"]))
    if shape == "defs":
        # One argument's schema lives in $defs.
        sub, sub_values = draw(_values)
        schema["$defs"] = {"Shared": sub}
        schema["properties"]["shared"] = {"$ref": "#/$defs/Shared"}
        return schema, _with(values, "shared", sub_values)
    if shape in ("allOf", "anyOf") and "additionalProperties" not in schema:
        # An argument declared in a subschema (zod and MCP servers write such schemas).
        schema[shape] = [{"properties": {"extra_arg": {"type": "integer"}}}]
        return schema, _with(values, "extra_arg", st.integers())
    if shape == "ifthen" and "additionalProperties" not in schema:
        schema["if"] = {"required": ["mode"]}
        schema["then"] = {"properties": {"detail": {"type": "string"}}}
        schema["properties"]["mode"] = {"type": "string"}
        return schema, _with(
            _with(values, "mode", st.text(max_size=3)), "detail", st.text(max_size=3)
        )
    return schema, values


def _with(values: st.SearchStrategy[dict[str, Any]], name: str, sub: st.SearchStrategy[Any]) -> Any:
    @st.composite
    def value(draw: st.DrawFn) -> dict[str, Any]:
        out = dict(draw(values))
        if draw(st.booleans()):
            out[name] = draw(sub)
        return out

    return value()


@st.composite
def _cases(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], bool]:
    schema, values = draw(_tool_schema())
    return schema, draw(values), draw(st.booleans())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_every_call_jsonschema_accepts_runs_with_its_arguments_unchanged(case: Any) -> None:
    schema, args, ascii_only = case
    assume(jsonschema.validators.validator_for(schema)(schema).is_valid(args))
    seen: list[dict[str, Any]] = []
    results: list[object] = []

    def tool(**kwargs: Any) -> object:
        seen.append(kwargs)
        results.append(object())
        return results[-1]

    guard = tg.Guard()
    wrapped = guard.register(tool, name="t", json_schema=schema)
    text = json.dumps(args, ensure_ascii=ascii_only)
    decoded = json.loads(text)
    context = f"{json.dumps(schema)}\n{text}"

    # The model's JSON text: exactly the decoded JSON (no int turned float, nothing dropped).
    result = guard.call("t", text)
    assert not isinstance(result, tg.Rejection), f"{context}\n{result}"
    assert result is results[-1]
    assert not same(seen[-1], decoded), context

    # A mapping (what the frameworks hand over), and the function itself: the very values.
    for run in (lambda: guard.call("t", args), lambda: wrapped(**args)):
        result = run()
        assert not isinstance(result, tg.Rejection), f"{context}\n{result}"
        assert result is results[-1]
        assert seen[-1] == args and all(seen[-1][k] is args[k] for k in args), context

    pending = guard.check("t", text)
    assert pending.rejection is None, f"{context}\n{pending.rejection}"
    assert not same(pending.arguments, decoded), context
    assert pending.finish(tool(**pending.arguments)).ok


_KIND = {"type": "string"}
DECLARED_ELSEWHERE = {
    "allOf": {"allOf": [{"properties": {"extra": _KIND}}]},
    "anyOf": {
        "anyOf": [{"properties": {"extra": _KIND}, "required": ["extra"]}, {"required": ["b"]}]
    },
    "oneOf": {"oneOf": [{"properties": {"extra": _KIND}, "required": ["extra"]}]},
    "if/then": {"if": {"required": ["kind"]}, "then": {"properties": {"extra": _KIND}}},
    "required only": {"required": ["extra"]},
    "dependentSchemas": {"dependentSchemas": {"kind": {"properties": {"extra": _KIND}}}},
    "dependencies (draft 7)": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "dependencies": {"kind": {"properties": {"extra": _KIND}}},
    },
    "$ref": {
        "allOf": [{"$ref": "#/$defs/More"}],
        "$defs": {"More": {"properties": {"extra": _KIND}}},
    },
    "patternProperties in allOf": {"allOf": [{"patternProperties": {"^ex": _KIND}}]},
}


@pytest.mark.parametrize("part", sorted(DECLARED_ELSEWHERE))
def test_an_argument_declared_in_a_subschema_is_no_unknown_argument(part: str) -> None:
    schema = {"type": "object", "properties": {"kind": _KIND}, **DECLARED_ELSEWHERE[part]}
    guard = tg.Guard()
    guard.register(lambda **kw: kw, name="t", json_schema=schema)
    args = {"kind": "k", "extra": "x"}
    assert guard.call("t", json.dumps(args)) == args
    # Strict still: a name the schema declares nowhere is unknown, a declared one is checked.
    unknown = guard.call("t", {"kind": "k", "extra": "x", "nowhere": 1})
    assert isinstance(unknown, tg.Rejection) and "nowhere" in unknown.message
    if part != "required only":  # there the name has no schema: any value is its value
        wrong = guard.call("t", {"kind": "k", "extra": 5})
        assert isinstance(wrong, tg.Rejection) and wrong.cause == "schema"


def test_a_contract_may_name_an_argument_declared_in_a_subschema() -> None:
    # It was "refs names 'order_id', which is not an argument" at declaration.
    schema = {"type": "object", "properties": {}, "allOf": [{"properties": {"order_id": _KIND}}]}
    guard = tg.Guard()
    guard.register(lambda **kw: kw, name="t", json_schema=schema, refs={"order_id": "order"})
    with guard.trajectory("refs"):
        blocked = guard.call("t", {"order_id": "o-1"})
        assert isinstance(blocked, tg.Rejection) and blocked.cause == "dependency"


def test_a_schema_whose_names_cannot_be_told_is_left_to_itself() -> None:
    # unevaluatedProperties decides on its own; closing it would refuse what it allows.
    schema = {
        "type": "object",
        "properties": {"a": _KIND},
        "unevaluatedProperties": {"type": "integer"},
    }
    guard = tg.Guard()
    guard.register(lambda **kw: kw, name="t", json_schema=schema)
    assert guard.call("t", {"a": "x", "b": 2}) == {"a": "x", "b": 2}
    assert isinstance(guard.call("t", {"a": "x", "b": "no"}), tg.Rejection)
