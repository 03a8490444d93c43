"""Whether every ``$ref`` of a tool's JSON Schema resolves (:func:`unresolvable_ref`), asked
once when the tool is declared: the validator would otherwise fail on a dangling one at the
first call it checks, inside the guard."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# Values, not subschemas: a ``{"$ref": ...}`` inside them is data.
_DATA_KEYWORDS = frozenset({"const", "default", "enum", "examples"})


def subschemas(schema: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every mapping in ``schema`` that may be a subschema, with its path (``a/b/0``), the
    root first; values of the data keywords are left out. Iterative: a schema nested deeper
    than Python's stack is walked all the same."""
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, Mapping):
            yield where, node
            items = ((str(k), v) for k, v in node.items() if k not in _DATA_KEYWORDS)
        elif isinstance(node, list):
            items = ((str(i), v) for i, v in enumerate(node))
        else:
            continue
        stack.extend((f"{where}/{k}" if where else k, v) for k, v in items)


def unresolvable_ref(schema: Mapping[str, Any]) -> str | None:
    """Why a ``$ref`` of the JSON Schema ``schema`` does not resolve, or None when every one
    does. Resolved within the schema and the JSON Schema metaschemas only, nothing fetched:
    the validator would fail on it at the first call it checks, not when the tool is declared.
    A schema with an ``$id`` below its root (a base URI of its own) is not checked."""
    from jsonschema import validators
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]
    from referencing.jsonschema import DRAFT202012, specification_with

    refs: list[str] = []
    for _, node in subschemas(schema):
        if node is not schema and "$id" in node:
            return None
        ref = node.get("$ref")
        if isinstance(ref, str):
            refs.append(ref)
    if not refs:
        return None
    cls = validators.validator_for(schema)
    dialect = specification_with(str(cls.META_SCHEMA.get("$schema", "")), default=DRAFT202012)
    resolver = REGISTRY.resolver_with_root(dialect.create_resource(schema))
    for ref in refs:
        try:
            resolver.lookup(ref)
        except Exception:  # Unresolvable, or a reference that is no URI at all
            return (
                f"$ref {ref!r} does not resolve within the schema (toolguard fetches no "
                "schema: define it under $defs)"
            )
    return None
