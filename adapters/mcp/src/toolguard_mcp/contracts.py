"""The contract an MCP proxy, server middleware or client wrapper checks tools by: from a
loaded file or from options written in code, and the contract entry at fault when a tool
cannot be declared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import toolguard as tg

ContractLike: TypeAlias = tg.Contract | Mapping[str, tg.ToolSpec | Mapping[str, Any]]


def as_contract(contract: ContractLike | None, mode: str = "block") -> tg.Contract:
    """A :class:`toolguard.Contract` from a loaded file, or from ``{tool: ToolSpec or options}``
    written in code (the options of ``@guard.tool``)."""
    if contract is None:
        return tg.Contract("<none>", mode)
    if isinstance(contract, tg.Contract):
        return contract
    tools = {}
    for name, spec in contract.items():
        if isinstance(spec, tg.ToolSpec):
            tools[name] = spec
        elif isinstance(spec, Mapping):
            tools[name] = tg.ToolSpec(name=name, **spec)
        else:
            raise tg.ToolDefinitionError(
                f"contract for {name!r} must be a ToolSpec or a mapping of its options, "
                f"not {type(spec).__name__}"
            )
    return tg.Contract("<code>", mode, tools)


def contract_fault(
    contract: tg.Contract, name: str, schema: Mapping[str, Any] | None, *, strict: bool = True
) -> tuple[str, str] | None:
    """(key, why) of the contract entry that keeps tool ``name`` from being declared; None
    when the server's own schema is at fault. Found by declaring the entry key by key on a
    scratch guard, so it names the key whatever the core's message says."""
    base = contract.tools.get(name)
    if base is None:
        return None
    scratch = tg.Guard(strict=strict)
    own = base.json_schema if base.json_schema is not None else schema
    try:
        scratch.declare(name, tg.ToolSpec(name=name, json_schema=own or {"type": "object"}))
    except Exception as exc:
        return ("json_schema", str(exc)) if base.json_schema is not None else None
    kept: dict[str, Any] = {}
    for key in ("refs", "produces", "invalidates", "grounded", "preconditions", "postconditions"):
        value = getattr(base, key)
        if not value:
            continue
        kept[key] = value
        try:
            spec = tg.ToolSpec(name=name, json_schema=own or {"type": "object"}, **kept)
            scratch.declare(name, spec, replace=True)
        except Exception as exc:
            return key, str(exc)
    try:
        scratch.declare(name, contract.spec_for(name, schema), replace=True)
    except Exception as exc:
        return "tools." + name, str(exc)
    return None
