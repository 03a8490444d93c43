"""BFCL function docs -> JSON Schema (draft 2020-12) for the guard's schema check.

BFCL writes its own type names (``dict``, ``float``, ``tuple``, ``any`` ...). In the
multi-turn docs only dict, string, integer, float, array and boolean occur (checked by
``test_bfcl.py``); the rest are mapped too so a future doc cannot slip through silently.
"""

from __future__ import annotations

from typing import Any

# BFCL type name -> JSON Schema type, shared with `toolguard replay bfcl`.
from toolguard.replay.bfcl_env import TYPE_MAP
from toolguard.runtime.tools.schema import accept_null_defaults


class UnknownTypeError(ValueError):
    pass


def _convert(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    bfcl_type = node.get("type")
    if bfcl_type is not None:
        if bfcl_type not in TYPE_MAP:
            raise UnknownTypeError(f"BFCL type {bfcl_type!r} has no JSON Schema mapping")
        mapped = TYPE_MAP[bfcl_type]
        if mapped is not None:
            out["type"] = mapped
    for key in ("description", "enum", "default"):
        if key in node:
            out[key] = node[key]
    if "items" in node:
        out["items"] = _convert(node["items"])
    if "properties" in node:
        out["properties"] = {k: _convert(v) for k, v in node["properties"].items()}
        # BFCL's nested dict docs (edit_ticket.updates) describe optional fields; the backend
        # itself rejects unknown ones, so we stay permissive at the nested level.
    if "required" in node and node.get("properties") is not None:
        out["required"] = list(node["required"])
    # Defaults are documentation (the backend applies its own), but say the argument is
    # optional: `null` for it means "the default" (accept_null_defaults, at the top level).
    return out


def to_json_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """The parameters of one BFCL function doc as a closed JSON Schema object."""
    params = doc.get("parameters", {"type": "dict", "properties": {}})
    schema = _convert(params)
    schema["type"] = "object"
    schema.setdefault("properties", {})
    # Unknown argument names are a schema error (docs/protocol.md section 2), so close the object.
    schema["additionalProperties"] = False
    return accept_null_defaults(schema)
