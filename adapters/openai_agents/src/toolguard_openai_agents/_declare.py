"""How a tool's contract joins the guard: one declaration per tool name.

A ``tg.Guard`` knows one tool per name, and checks every call of that name against it. Two
agents that share a guard may each have their own ``FunctionTool`` of one name with different
parameters: checked against the first one's schema, the second one's legal calls were all
blocked. The guard keeps the schemas of the tools it declared under each name, and a tool of
that name with other parameters widens the declaration's schema to either (``anyOf``), with a
warning naming the tool: no legal call of either is blocked, and the SDK's own argument
validation still refuses, before the function runs, what only the other tool's schema allows.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from collections.abc import Mapping
from typing import Any
from weakref import WeakKeyDictionary

import toolguard as tg

from ._sdk import FunctionTool

Contract = tg.ToolSpec | tg.ToolOptions
Schema = Mapping[str, Any]


@dataclasses.dataclass
class _Declared:
    """What this adapter declared under one name: the tools' schemas, the latest contract,
    and the guard's tool it made (anything else under the name is the user's own)."""

    schemas: list[Schema]
    contract: Contract | None
    description: str | None
    tool: tg.Tool | None = None


_declared: WeakKeyDictionary[tg.Guard, dict[str, _Declared]] = WeakKeyDictionary()


def declare(guard: tg.Guard, tool: FunctionTool, contract: Contract | None) -> None:
    """Make ``guard`` check ``tool``'s calls: by ``contract``, else by what the guard already
    knows under its name (the user's declaration), else by its schema alone."""
    known = _declared.setdefault(guard, {})
    record = known.get(tool.name)
    if record is not None and not _still_ours(guard, tool.name, record):
        record = None  # the user declared the name since: theirs
    schema = tool.params_json_schema
    if record is None:
        if contract is None and guard.has_tool(tool.name):
            return  # declared or registered by the user under this name: theirs holds
        record = _Declared([schema], contract, tool.description or None)
    else:
        widened = schema not in record.schemas
        if contract is None and not widened:
            return
        if widened:
            record.schemas.append(schema)
            _warn_shared_name(tool.name, record.schemas)
        if contract is not None:
            record.contract = contract
    record.tool = _declare_contract(guard, tool.name, record)
    known[tool.name] = record


def _still_ours(guard: tg.Guard, name: str, record: _Declared) -> bool:
    return guard.has_tool(name) and guard.get_tool(name) is record.tool


def _declare_contract(guard: tg.Guard, name: str, record: _Declared) -> tg.Tool:
    contract, schema = record.contract, either(record.schemas)
    if contract is None:
        return guard.declare(name, json_schema=schema, description=record.description, replace=True)
    if isinstance(contract, tg.ToolSpec):
        has_schema = contract.json_schema is not None or contract.args_model is not None
        # A fresh spec: the user's object is not renamed, and may serve several tools.
        spec = dataclasses.replace(
            contract,
            name=name,
            json_schema=contract.json_schema if has_schema else schema,
            description=contract.description or record.description,
        )
        return guard.declare(name, spec, replace=True)
    options: dict[str, Any] = dict(contract)
    if "json_schema" not in options and "args_model" not in options:
        options["json_schema"] = schema
    options.setdefault("description", record.description)
    return guard.declare(name, replace=True, **options)


def either(schemas: list[Schema]) -> Schema:
    """A schema any of ``schemas`` satisfies: the one itself, else their ``anyOf``, with
    their ``$defs`` at the root where their ``$ref``s look. Definitions of one name that
    differ cannot share that root: then any object (the SDK's own validation still runs)."""
    if len(schemas) == 1:
        return schemas[0]
    defs: dict[str, Any] = {}
    for schema in schemas:
        for key, value in schema.get("$defs", {}).items():
            if defs.setdefault(key, value) != value:
                return {"type": "object"}
    branches = [{k: v for k, v in s.items() if k != "$defs"} for s in schemas]
    return {"anyOf": branches, **({"$defs": defs} if defs else {})}


def _warn_shared_name(name: str, schemas: list[Schema]) -> None:
    params = " and ".join("(" + ", ".join(sorted(s.get("properties", {}))) + ")" for s in schemas)
    warnings.warn(
        f"toolguard: one Guard guards {len(schemas)} different function tools named {name!r} "
        f"(parameters {params}); a Guard knows one tool per name, so each call of {name!r} is "
        "now checked against any of their schemas, and one contract applies to all of them. "
        "Use one Guard per agent, or give the tools distinct names (name_override=).",
        UserWarning,
        stacklevel=_outside_the_adapter(),
    )


def _outside_the_adapter() -> int:
    # The warning points at the user's line (guard_agent, guard_tools, ...), however deep
    # inside the adapter it was raised.
    level, frame = 1, sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
        __package__ or __name__
    ):
        level, frame = level + 1, frame.f_back
    return level
