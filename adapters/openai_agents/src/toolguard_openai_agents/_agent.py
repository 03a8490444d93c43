"""guard_agent: an agent (and the agents it hands off to) whose function tools are guarded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import toolguard as tg

from ._declare import Contract
from ._hooks import GuardHooks
from ._sdk import Agent, FunctionTool
from ._tools import _check_contract_names, guard_tool_list

A = TypeVar("A", bound=Agent[Any])


def guard_agent(
    agent: A,
    guard: tg.Guard,
    *,
    contracts: Mapping[str, Contract] | None = None,
    handoffs: bool = True,
) -> A:
    """A clone of ``agent`` whose function tools ``guard`` checks, and whose turns reserve the
    trajectory's steps in emission order; ``agent`` itself is not changed.

    ``contracts``: tool name -> ``tg.ToolSpec`` or ``guard.declare`` options (see
    :func:`guard_tools`). ``handoffs``: also guard the agents this one hands off to (the
    clones hand off to each other); ``Handoff`` objects wrapping an agent are kept as they are.
    """
    contracts = dict(contracts or {})
    graph = _reachable(agent) if handoffs else [agent]
    _check_contract_names(
        contracts, {t.name for a in graph for t in a.tools if isinstance(t, FunctionTool)}
    )
    clones: dict[int, Agent[Any]] = {}
    for original in graph:
        hooks = original.hooks
        if not (isinstance(hooks, GuardHooks) and hooks.guard is guard):
            hooks = GuardHooks(guard, hooks)
        clones[id(original)] = original.clone(
            tools=guard_tool_list(original.tools, guard, contracts), hooks=hooks
        )
    if handoffs:
        for original in graph:
            clones[id(original)].handoffs = [
                clones.get(id(h), h) if isinstance(h, Agent) else h for h in original.handoffs
            ]
    return clones[id(agent)]  # type: ignore[return-value]


def _reachable(agent: Agent[Any]) -> list[Agent[Any]]:
    seen: dict[int, Agent[Any]] = {}
    todo = [agent]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen[id(current)] = current
        todo.extend(h for h in current.handoffs if isinstance(h, Agent))
    return list(seen.values())
