"""A JSON Schema translated once into a pydantic-core validator, for the calls it accepts.

``jsonschema`` walks the schema in Python on every call; a ``SchemaValidator`` checks the
same arguments in Rust. The translation covers a subset of JSON Schema whose meaning
pydantic-core expresses exactly, and it is used one way only: arguments the fast validator
accepts are valid; anything it refuses is judged again by ``jsonschema``, which gives the
verdict and the message, as before. So the translation must never accept what ``jsonschema``
refuses; refusing more only costs time (``4.0`` as an ``integer``, which ``jsonschema``
accepts and pydantic's strict int does not, takes the slow path and is accepted there).

Covered: ``type`` (one or a list), ``properties``, ``required``, ``additionalProperties``
(a boolean or a schema), ``items`` (a schema), ``minItems``/``maxItems``, ``minLength``/
``maxLength``, ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``, ``enum`` of
strings, ``anyOf``, ``{}``/``true``, and the annotations (``title``, ``description``,
``default``, ``examples``, ``format``: this validator is built without a format checker,
so formats assert nothing). Anything else makes the whole schema slow-path only:
``pattern`` (Python's ``re`` and Rust's regex differ), ``$ref``/``$defs``, ``oneOf``,
``allOf``, ``not``, ``if``/``then``/``else``, ``const``, ``patternProperties``,
``dependentSchemas``/``dependentRequired``, ``propertyNames``, ``uniqueItems``,
``prefixItems``, ``contains``, ``multipleOf``, ``min``/``maxProperties``, enums of other
values (``1 == True`` in Python: a literal would blur them), draft-04 and older.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from pydantic_core import CoreSchema, SchemaValidator
from pydantic_core import core_schema as cs

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "format", "$comment", "deprecated"}
    | {"readOnly", "writeOnly", "$schema", "$id"}
)
_BY_TYPE: dict[str, frozenset[str]] = {
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "string": frozenset({"minLength", "maxLength"}),
    "integer": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "boolean": frozenset(),
    "null": frozenset(),
}
# Drafts whose meaning of the covered keywords is the one translated here (draft 4 has
# boolean exclusiveMinimum; draft 3 another `required`).
_DRAFTS = frozenset(
    {
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)


class _Unsupported(Exception):
    pass


_BUILT: dict[str, Callable[[Any], Any] | None] = {}  # schema JSON -> its validator


def fast_validator(schema: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    """A ``validate_python`` that raises on anything it does not accept, or None when the
    schema is outside the covered subset (the call path then uses ``jsonschema`` alone)."""
    try:
        key: str | None = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        key = None
    if key is not None and key in _BUILT:
        # A server's many tools of one schema translate and build it once.
        return _BUILT[key]
    made = _build(schema)
    if key is not None and len(_BUILT) < 4096:
        _BUILT[key] = made
    return made


def _build(schema: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    draft = schema.get("$schema")
    if draft is not None and (not isinstance(draft, str) or draft.rstrip("#") not in _DRAFTS):
        return None
    try:
        core = _translate(schema, 0)
        validator = SchemaValidator(core)
    except Exception:  # outside the subset, or a core schema pydantic refuses: slow path
        return None
    validate = validator.validate_python

    def run(args: Any) -> Any:
        return validate(args, strict=True)

    return run


def _translate(schema: Any, depth: int) -> CoreSchema:
    if depth > 32:
        raise _Unsupported
    if schema is True:
        return cs.any_schema()
    if not isinstance(schema, Mapping):
        raise _Unsupported  # `false`, or not a schema
    keys = set(schema) - _ANNOTATIONS
    if not keys:
        return cs.any_schema()
    if "anyOf" in schema:
        choices = schema["anyOf"]
        if keys != {"anyOf"} or not isinstance(choices, list) or not choices:
            raise _Unsupported
        return _union([_translate(s, depth + 1) for s in choices])
    if "enum" in schema:
        return _enum(schema, keys)
    kind = schema.get("type")
    if kind is None:
        raise _Unsupported  # type-specific keywords apply only to values of their type
    kinds = [kind] if isinstance(kind, str) else kind
    if not isinstance(kinds, list) or not kinds or not all(k in _BY_TYPE for k in kinds):
        raise _Unsupported
    rest = keys - {"type"}
    if len(kinds) > 1:
        if rest:
            raise _Unsupported
        return _union([_translate({"type": k}, depth + 1) for k in kinds])
    kind = kinds[0]
    if not rest <= _BY_TYPE[kind]:
        raise _Unsupported
    if kind == "object":
        return _object(schema, depth)
    if kind == "array":
        items = _translate(schema.get("items", True), depth + 1)
        return cs.list_schema(
            items, min_length=_count(schema, "minItems"), max_length=_count(schema, "maxItems")
        )
    if kind == "string":
        return cs.str_schema(
            min_length=_count(schema, "minLength"), max_length=_count(schema, "maxLength")
        )
    if kind == "integer":
        return _integer(_bounds(schema))
    if kind == "number":
        bounds = _bounds(schema)
        if not bounds:
            return cs.float_schema()  # strict: a float or an int, never a bool
        # An int is compared exactly (Python compares int and float exactly; an int converted
        # to a float may round onto a bound), a float against float bounds.
        return _union([_integer(bounds), _float(bounds)])
    if kind == "boolean":
        return cs.bool_schema()
    return cs.none_schema()


def _union(choices: list[Any]) -> CoreSchema:
    return choices[0] if len(choices) == 1 else cs.union_schema(list(choices))


def _enum(schema: Mapping[str, Any], keys: set[str]) -> CoreSchema:
    values = schema["enum"]
    if not isinstance(values, list) or not values or not all(type(v) is str for v in values):
        raise _Unsupported
    if keys - {"enum", "type"} or schema.get("type", "string") not in ("string", ["string"]):
        raise _Unsupported
    return cs.literal_schema(list(values))


def _object(schema: Mapping[str, Any], depth: int) -> CoreSchema:
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(props, Mapping) or not isinstance(required, list):
        raise _Unsupported
    if not all(type(n) is str for n in [*props, *required]) or len(set(required)) != len(required):
        raise _Unsupported
    fields = {
        name: cs.typed_dict_field(_translate(sub, depth + 1), required=name in required)
        for name, sub in props.items()
    }
    extras = None if extra is True or extra is False else _translate(extra, depth + 1)
    for name in required:
        if name not in fields:
            # Required but not a property: additionalProperties judges its value (false:
            # nothing is valid, left to jsonschema).
            if extra is False:
                raise _Unsupported
            fields[name] = cs.typed_dict_field(extras or cs.any_schema(), required=True)
    if extra is False:
        return cs.typed_dict_schema(fields, extra_behavior="forbid")
    return cs.typed_dict_schema(fields, extra_behavior="allow", extras_schema=extras)


def _count(schema: Mapping[str, Any], key: str) -> int | None:
    value = schema.get(key)
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise _Unsupported  # 2.0 is a valid minLength in draft 6+; rare enough to skip
    return value


def _bounds(schema: Mapping[str, Any]) -> dict[str, int | float]:
    out: dict[str, int | float] = {}
    for key, name in (
        ("minimum", "ge"),
        ("maximum", "le"),
        ("exclusiveMinimum", "gt"),
        ("exclusiveMaximum", "lt"),
    ):
        value = schema.get(key)
        if value is None:
            continue
        if type(value) not in (int, float) or not math.isfinite(value):
            raise _Unsupported
        out[name] = value
    return out


def _integer(bounds: Mapping[str, int | float]) -> CoreSchema:
    """An int within ``bounds``, each bound made the nearest int that keeps its meaning."""
    ge, le = [], []
    for name, value in bounds.items():
        if name == "ge":
            ge.append(math.ceil(value))
        elif name == "gt":
            ge.append(math.floor(value) + 1)
        elif name == "le":
            le.append(math.floor(value))
        else:
            le.append(math.ceil(value) - 1)
    return cs.int_schema(ge=max(ge) if ge else None, le=min(le) if le else None)


def _float(bounds: Mapping[str, int | float]) -> CoreSchema:
    """A float (not an int: those take the exact branch) within ``bounds``."""
    exact: dict[str, float] = {}
    for name, value in bounds.items():
        if float(value) != value:
            raise _Unsupported  # an int bound a float cannot hold: compared rounded
        exact[name] = float(value)
    number = cs.float_schema(
        ge=exact.get("ge"), le=exact.get("le"), gt=exact.get("gt"), lt=exact.get("lt")
    )
    return cs.chain_schema([cs.is_instance_schema(float), number])
