"""The pydantic-core validator translated from a JSON Schema (schema_core.py) changes no
verdict: the guard's answer with it (valid, or the failure and its messages) is the one
jsonschema alone gives, on random schemas of the covered subset and random arguments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard.runtime.tools import json_schema as schema_module
from toolguard.runtime.tools.json_schema import from_json_schema
from toolguard.runtime.tools.schema import SchemaFailure
from toolguard.runtime.tools.schema_core import fast_validator

NAMES = ["a", "b", "c"]
_bound = st.integers(-3, 3) | st.sampled_from([0.5, -1.5, 2.0, 2**53, 2**53 + 1])


def _scalar_schema() -> st.SearchStrategy[dict[str, Any]]:
    integer = st.fixed_dictionaries(
        {"type": st.just("integer")},
        optional={"minimum": _bound, "maximum": _bound, "exclusiveMinimum": _bound},
    )
    number = st.fixed_dictionaries(
        {"type": st.just("number")},
        optional={"minimum": _bound, "exclusiveMaximum": _bound, "maximum": _bound},
    )
    string = st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={"minLength": st.integers(0, 3), "maxLength": st.integers(0, 3)},
    )
    enum = st.fixed_dictionaries(
        {"enum": st.lists(st.sampled_from(["x", "y", "1", ""]), min_size=1, max_size=3)},
        optional={"type": st.just("string")},
    )
    simple = st.sampled_from(
        [
            {"type": "boolean"},
            {"type": "null"},
            {},
            {"type": ["string", "null"]},
            {"type": ["integer", "boolean"]},
            {"type": "number", "format": "double"},
        ]
    )
    return integer | number | string | enum | simple


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    array = st.fixed_dictionaries(
        {"type": st.just("array")},
        optional={
            "items": children,
            "minItems": st.integers(0, 2),
            "maxItems": st.integers(0, 3),
        },
    )
    return (
        array
        | _object(children)
        | st.lists(children, min_size=1, max_size=3).map(lambda s: {"anyOf": s})
    )


def _object(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={
            "properties": st.dictionaries(st.sampled_from(NAMES), children, max_size=3),
            "required": st.lists(st.sampled_from(NAMES), unique=True, max_size=3),
            "additionalProperties": st.booleans() | children,
            "description": st.just("annotations assert nothing"),
        },
    )


schemas = st.recursive(_scalar_schema(), _extend, max_leaves=6)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-4, 4)
    | st.sampled_from([2**53, 2**53 + 1, 2**80])
    | st.floats(allow_nan=True, width=32)
    | st.sampled_from([4.0, 0.5, -1.5, 2.0**53])
    | st.sampled_from(["", "x", "y", "1", "xyz", "é", "\U0001f600"]),
    lambda c: (
        st.lists(c, max_size=3)
        | st.lists(c, max_size=2).map(tuple)
        | st.dictionaries(st.sampled_from([*NAMES, "d"]), c, max_size=3)
    ),
    max_leaves=10,
)


def _verdict(schema: dict[str, Any], args: dict[str, Any], fast: bool) -> Any:
    saved = schema_module.FAST_JSON_SCHEMA
    schema_module.FAST_JSON_SCHEMA = fast
    try:
        validate = from_json_schema("t", schema).validate
    finally:
        schema_module.FAST_JSON_SCHEMA = saved
    try:
        return ("valid", validate(args))
    except SchemaFailure as exc:
        f = exc.failure
        return ("invalid", f.check, f.message, f.model_message, f.telemetry_message)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(
    props=st.dictionaries(st.sampled_from(NAMES), schemas, max_size=3),
    required=st.lists(st.sampled_from(NAMES), unique=True, max_size=3),
    extra=st.sampled_from([None, True, False]),
    args=st.dictionaries(st.sampled_from([*NAMES, "d"]), values, max_size=4),
)
def test_the_fast_validator_changes_no_verdict(
    props: dict[str, Any], required: list[str], extra: bool | None, args: dict[str, Any]
) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if extra is not None:
        schema["additionalProperties"] = extra
    assert _verdict(schema, args, True) == _verdict(schema, args, False)


@settings(max_examples=200, deadline=None)
@given(schema=schemas, value=values)
def test_the_fast_validator_accepts_only_what_jsonschema_accepts(schema: Any, value: Any) -> None:
    from jsonschema import Draft202012Validator

    fast = fast_validator(schema)
    if fast is None:  # required names only additionalProperties: false could judge
        return
    try:
        fast(value)
    except Exception:
        return
    assert Draft202012Validator(schema).is_valid(value), (schema, value)


@pytest.mark.parametrize(
    ("kind", "value"),
    [("integer", True), ("integer", "42"), ("number", False), ("string", 1), ("boolean", 1)],
)
def test_strict_no_coercion(kind: str, value: Any) -> None:
    fast = fast_validator({"type": kind})
    assert fast is not None
    with pytest.raises(Exception):  # noqa: B017 - any refusal sends it to jsonschema
        fast(value)


def test_integer_4_0_is_refused_fast_and_judged_by_jsonschema() -> None:
    # jsonschema (draft 6+) counts 4.0 as an integer; strict pydantic does not: the fast
    # validator refuses and the slow path decides, so the verdict stays jsonschema's.
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    with pytest.raises(Exception):  # noqa: B017
        fast_validator(schema)(4.0)  # type: ignore[misc]
    assert _verdict(schema, {"n": 4.0}, True) == _verdict(schema, {"n": 4.0}, False)


@pytest.mark.parametrize(
    "sub",
    [
        {"type": "string", "pattern": "^a"},
        {"$ref": "#/$defs/x"},
        {"oneOf": [{"type": "string"}]},
        {"not": {"type": "string"}},
        {"if": {"type": "string"}, "then": {"minLength": 1}},
        {"type": "object", "patternProperties": {"^a": {}}},
        {"type": "object", "dependentSchemas": {"a": {}}},
        {"const": 1},
        {"enum": [1, True]},
        {"type": "array", "uniqueItems": True},
        {"minLength": 1},
    ],
)
def test_keywords_outside_the_subset_take_jsonschema_alone(sub: dict[str, Any]) -> None:
    assert fast_validator({"type": "object", "properties": {"a": sub}}) is None


def test_draft_4_takes_jsonschema_alone() -> None:
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}
    assert fast_validator(schema) is None
    assert fast_validator({**schema, "$schema": "http://json-schema.org/draft-07/schema#"})
