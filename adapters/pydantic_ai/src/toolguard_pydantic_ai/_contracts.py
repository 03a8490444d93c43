"""The user's contracts: their shape checked when the capability is built, their tool names
and argument names when the agent's tools are known (the first model request of a run), so a
misspelt tool or a malformed contract fails before any tool runs, naming the contract."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import toolguard as tg
from pydantic_ai import RunContext
from pydantic_ai.toolsets import (
    AbstractToolset,
    CombinedToolset,
    FunctionToolset,
    PrefixedToolset,
    RenamedToolset,
    WrapperToolset,
)

_OPTIONS = frozenset(tg.ToolOptions.__required_keys__ | tg.ToolOptions.__optional_keys__)
_MAPPINGS = {
    "refs": "argument -> kind",
    "produces": "place in the result -> kind",
    "invalidates": "argument -> kind",
}
_LISTS = {
    "preconditions": "of tg.Precondition",
    "postconditions": "of tg.Postcondition",
    "grounded": "of argument names",
}
# A stand-in schema for the trial declaration: any arguments, names unknown. Whether the
# contract's refs, grounded and invalidates name arguments is checked against the real tool.
_ANY_ARGUMENTS = {"type": "object"}


def checked(contracts: Any) -> dict[str, tg.ToolOptions]:
    """``contracts`` (tool name -> ``guard.declare`` options), each one's shape checked."""
    if contracts is None:
        return {}
    if not isinstance(contracts, Mapping):
        raise TypeError(
            "ToolGuard contracts must be a mapping of tool name -> guard.declare options, "
            f"not {type(contracts).__name__}"
        )
    out: dict[str, tg.ToolOptions] = {}
    for name, contract in contracts.items():
        if not isinstance(name, str):
            raise TypeError(f"ToolGuard contracts: a tool name must be a str, not {name!r}")
        out[name] = _checked(name, contract)
    return out


def _checked(name: str, contract: Any) -> tg.ToolOptions:
    where = f"ToolGuard contracts[{name!r}]"
    if not isinstance(contract, Mapping):
        raise tg.ToolDefinitionError(
            f"{where} must be a mapping of guard.declare options (refs, produces, "
            f"invalidates, preconditions, grounded, mode, ...), not {type(contract).__name__}"
        )
    unknown = sorted(map(str, set(contract) - _OPTIONS))
    if unknown:
        raise tg.ToolDefinitionError(
            f"{where}: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(_OPTIONS))}"
        )
    options: dict[str, Any] = dict(contract)
    _check_containers(where, options)
    trial = dict(options)
    if "json_schema" not in trial and "args_model" not in trial:
        trial["json_schema"] = _ANY_ARGUMENTS
    try:
        # Compiled the way the guard will, on no guard: every check that needs no argument
        # names (produces, conditions, mode, dry_run, ...) runs now, not at the first call.
        tg.ToolSpec(name=name, **trial).compile(None, name)
    except Exception as exc:  # a value of the wrong type fails as whatever it trips over
        raise tg.ToolDefinitionError(f"{where}: {exc}") from exc
    return options  # type: ignore[return-value]  # its keys were checked just above


def _check_containers(where: str, options: Mapping[str, Any]) -> None:
    # The core reads these as it iterates them: a list where a mapping belongs fails there as
    # "dictionary update sequence element #0 ...", and a string where a list belongs is read
    # letter by letter.
    for key in _MAPPINGS:
        if key in options and not isinstance(options[key], Mapping):
            raise tg.ToolDefinitionError(
                f"{where}: {key} must be a mapping ({_MAPPINGS[key]}), "
                f"not {type(options[key]).__name__}"
            )
    for key in _LISTS:
        value = options.get(key, ())
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            raise tg.ToolDefinitionError(
                f"{where}: {key} must be a list ({_LISTS[key]}), not {value!r}"
            )


def check_names(contracts: Mapping[str, Any], names: Iterable[str]) -> None:
    """A contract under a name no tool of the agent has would leave the tool it was meant
    for unguarded by it: an error, as soon as the tools are known."""
    known = set(names)
    missing = sorted(set(contracts) - known)
    if missing:
        raise ValueError(
            f"ToolGuard contracts name tools that are not tools of this agent: "
            f"{', '.join(missing)} (its tools: {', '.join(sorted(known)) or 'none'})"
        )


def agent_tool_names(ctx: RunContext[Any]) -> set[str]:
    """The names the model sees for the function tools of the agent and of this run
    (``run(toolsets=...)``), also those a ``prepare`` function hides from this step (they may
    be offered later in the run)."""
    toolsets: list[AbstractToolset[Any]] = []
    if ctx.agent is not None:
        toolsets.extend(ctx.agent.toolsets)
    manager = ctx.tool_manager
    if manager is not None and isinstance(manager.toolset, AbstractToolset):
        toolsets.append(manager.toolset)  # the run's: the agent's and those given to the run
    return {name for toolset in toolsets for name in _shown_names(toolset)}


def _shown_names(toolset: AbstractToolset[Any]) -> set[str]:
    # A toolset that renames its tools (prefixed, renamed) hands the model, and the hooks, the
    # new name: a contract under the FunctionToolset's own name would never apply.
    if isinstance(toolset, FunctionToolset):
        return set(toolset.tools)
    if isinstance(toolset, PrefixedToolset):
        return {f"{toolset.prefix}_{name}" for name in _shown_names(toolset.wrapped)}
    if isinstance(toolset, RenamedToolset):
        new_names = {original: new for new, original in toolset.name_map.items()}
        return {new_names.get(name, name) for name in _shown_names(toolset.wrapped)}
    if isinstance(toolset, WrapperToolset):
        return _shown_names(toolset.wrapped)
    if isinstance(toolset, CombinedToolset):
        return {name for inner in toolset.toolsets for name in _shown_names(inner)}
    names: set[str] = set()  # another kind: the function tools it holds, by their own names

    def visit(leaf: AbstractToolset[Any]) -> None:
        if isinstance(leaf, FunctionToolset):
            names.update(leaf.tools)

    toolset.apply(visit)
    return names
