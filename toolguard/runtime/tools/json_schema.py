"""Argument schemas from a JSON Schema (the way MCP and OpenAI function specs describe tools):
validated with the ``jsonschema`` library, and first by a pydantic-core validator translated
from it where that is exact (``schema_core.py``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..._errors import ToolDefinitionError
from ..verdict import shorten_text
from .conditions import shorten
from .json_schema_refs import unresolvable_ref
from .json_schema_regex import format_checker, python_only_keys, validator_class
from .schema import ArgumentSchema, Located, _hint_from_json_schema, _schema_error
from .schema_core import fast_validator

# False: JSON Schemas are judged by jsonschema alone (the equivalence tests' reference).
FAST_JSON_SCHEMA = True
_CHECKED_SCHEMAS: set[tuple[Any, str]] = set()  # (metaschema's validator class, schema JSON)


def from_json_schema(
    tool: str, schema: Mapping[str, Any], *, strict: bool = True
) -> ArgumentSchema:
    """Validation by a JSON Schema. ``strict``: an argument the schema does not list is
    unknown even without ``"additionalProperties": false`` (the model was shown the list)."""
    from jsonschema import exceptions, validators

    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(f"tool {tool!r}: json_schema must be a mapping")
    # A pattern only ECMA-262 reads (``\p{L}``) is matched as ECMA-262 (json_schema_regex.py).
    cls = validator_class(validators.validator_for(schema))
    try:
        key = (cls, json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError):  # not JSON: checked every time
        key = None
    if key is None or key not in _CHECKED_SCHEMAS:
        try:
            cls.check_schema(dict(schema), format_checker=format_checker(cls))
        except exceptions.SchemaError as exc:
            path = "/".join(str(p) for p in exc.path) or "(root)"
            raise ToolDefinitionError(
                f"tool {tool!r}: its JSON Schema is invalid at {path}: {exc.message}"
            ) from None
        ecma_key = python_only_keys(schema)
        if ecma_key is not None:
            raise ToolDefinitionError(
                f"tool {tool!r}: its JSON Schema's {ecma_key} is not a Python regular "
                "expression (an ECMA-262-only pattern is read in `pattern`, not as a "
                "patternProperties key)"
            )
        dangling = unresolvable_ref(schema)
        if dangling is not None:
            raise ToolDefinitionError(f"tool {tool!r}: its JSON Schema's {dangling}")
        # Checking a schema against its metaschema is most of what declaring a tool costs:
        # many tools of one schema (a server's 10,000 tools) check it once.
        if key is not None and len(_CHECKED_SCHEMAS) < 4096:
            _CHECKED_SCHEMAS.add(key)
    props = schema.get("properties")
    if strict and isinstance(props, Mapping) and "additionalProperties" not in schema:
        schema = _closed(schema)
        props = schema["properties"]
    validator = cls(schema)
    names = tuple(props) if isinstance(props, Mapping) else None
    hint = _hint_from_json_schema(tool, schema)

    fast = fast_validator(schema) if FAST_JSON_SCHEMA else None

    def validate(args: dict[str, Any]) -> dict[str, Any]:
        if fast is not None:
            try:
                fast(args)
            except Exception:  # refused (or not checkable there): jsonschema judges it
                pass
            else:
                return args
        errors = sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.path)))
        if errors:
            problems = [f"{_json_path(e.path)}: {shorten_text(e.message)}" for e in errors]
            safe = [
                f"{_json_path(e.path)}: fails {e.validator!r} ({shorten(e.validator_value)})"
                for e in errors
            ]
            raise _schema_error(tool, problems, safe, hint)
        return args

    def locate(args: dict[str, Any]) -> list[Located]:
        found: list[Located] = []
        for error in validator.iter_errors(args):
            # "required" and "additionalProperties" fail at the root: placed at the argument.
            if error.validator == "required" and isinstance(error.validator_value, list):
                found += [
                    ((n,), "missing required argument")
                    for n in error.validator_value
                    if n not in args
                ]
            elif error.validator == "additionalProperties" and names is not None:
                found += [((k,), "unknown argument") for k in args if k not in names]
            else:
                found.append((tuple(error.path), shorten_text(error.message)))
        return found

    argument_schema = ArgumentSchema(tool, names, validate, hint)
    argument_schema.locate = locate
    return argument_schema


def _json_path(path: Any) -> str:
    return shorten_text(".".join(str(p) for p in path)) or "arguments"


def _closed(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` refusing arguments it declares nowhere. ``additionalProperties`` sees only
    its siblings, so the names and patterns declared in subschemas (``allOf``, ``anyOf``,
    ``oneOf``, ``if``/``then``/``else``, dependencies, a local ``$ref``) and required names
    without a property join the root's properties as ``{}``, which asserts nothing. A
    schema whose declared names cannot be told (a remote ``$ref``, ``unevaluatedProperties``)
    is left as it is: refusing its legal arguments would be worse than accepting unknown ones."""
    found = _declared(schema, schema, set(), 0)
    if found is None:
        return schema
    names, patterns = found
    props: Mapping[str, Any] = schema["properties"]
    own_patterns = schema.get("patternProperties")
    closed = {
        **schema,
        "properties": {**props, **{n: {} for n in sorted(names) if n not in props}},
        "additionalProperties": False,
    }
    if isinstance(own_patterns, Mapping) or patterns:
        own = dict(own_patterns) if isinstance(own_patterns, Mapping) else {}
        closed["patternProperties"] = {**own, **{p: {} for p in sorted(patterns) if p not in own}}
    return closed


_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_SUBSCHEMAS = ("if", "then", "else")


def _declared(
    schema: Any, root: Mapping[str, Any], refs: set[str], depth: int
) -> tuple[set[str], set[str]] | None:
    """The property names and patterns ``schema`` declares for the object it validates, or
    None where that cannot be told."""
    if not isinstance(schema, Mapping):
        return set(), set()  # true / false
    if depth > 32 or {"unevaluatedProperties", "$dynamicRef", "$recursiveRef"} & set(schema):
        return None
    props, required = schema.get("properties"), schema.get("required")
    names = {n for n in props if isinstance(n, str)} if isinstance(props, Mapping) else set()
    if isinstance(required, list):
        names |= {n for n in required if isinstance(n, str)}
    pattern_props = schema.get("patternProperties")
    patterns = set(pattern_props) if isinstance(pattern_props, Mapping) else set()
    subs: list[Any] = [schema.get(k) for k in _SUBSCHEMAS if k in schema]
    subs += [s for k in _SUBSCHEMA_LISTS if isinstance(schema.get(k), list) for s in schema[k]]
    for key in ("dependentSchemas", "dependencies", "dependentRequired"):
        table = schema.get(key)
        if not isinstance(table, Mapping):
            continue
        for name, then in table.items():
            names.add(name)
            if isinstance(then, list):
                names |= {n for n in then if isinstance(n, str)}
            else:
                subs.append(then)
    ref = schema.get("$ref")
    if ref is not None:
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None  # a remote schema: its names are unknown here
        if ref not in refs:
            target = _pointer(root, ref)
            if target is None:
                return None
            subs.append(target)
            refs = refs | {ref}
    for sub in subs:
        found = _declared(sub, root, refs, depth + 1)
        if found is None:
            return None
        names |= found[0]
        patterns |= found[1]
    return names, patterns


def _pointer(root: Mapping[str, Any], ref: str) -> Any:
    """The subschema a local ``$ref`` (``#/$defs/Name``) points to, or None."""
    node: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
