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
    cls = validators.validator_for(schema)
    try:
        key = (cls, json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError):  # not JSON: checked every time
        key = None
    if key is None or key not in _CHECKED_SCHEMAS:
        try:
            cls.check_schema(dict(schema))
        except exceptions.SchemaError as exc:
            path = "/".join(str(p) for p in exc.path) or "(root)"
            raise ToolDefinitionError(
                f"tool {tool!r}: its JSON Schema is invalid at {path}: {exc.message}"
            ) from None
        # Checking a schema against its metaschema is most of what declaring a tool costs:
        # many tools of one schema (a server's 10,000 tools) check it once.
        if key is not None and len(_CHECKED_SCHEMAS) < 4096:
            _CHECKED_SCHEMAS.add(key)
    props = schema.get("properties")
    if strict and isinstance(props, Mapping) and "additionalProperties" not in schema:
        schema = {**schema, "additionalProperties": False}
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
