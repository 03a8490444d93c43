"""Agent hooks that number a model turn's tool calls before any of them runs.

The SDK runs a turn's function calls as concurrent tasks, so the order in which the guard
sees them is the order the tasks happen to get there. ``on_llm_end`` fires after the model
answered and before any tool task is created: it reserves the trajectory's steps for the
turn's call ids in the order the model emitted them, and records the calls the SDK is about
to refuse because the agent has no such tool (a ``ModelBehaviorError``, or the "not found"
message with ``tool_not_found_behavior="return_error_to_model"``), so that T counts them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import Any
from weakref import WeakKeyDictionary

import toolguard as tg

from ._sdk import (
    Agent,
    AgentHooks,
    AgentHooksBase,
    FunctionTool,
    Handoff,
    ModelResponse,
    ResponseFunctionToolCall,
)
from ._tools import guarded_by, inside_tool


class GuardHooks(AgentHooks[Any]):
    """The agent's hooks with the guard's turn numbering added; every event is also passed
    on to the hooks the agent already had (``inner``)."""

    def __init__(self, guard: tg.Guard, inner: AgentHooksBase[Any, Any] | None = None) -> None:
        self.guard = guard
        self.inner = inner

    async def on_llm_end(self, context: Any, agent: Agent[Any], response: ModelResponse) -> None:
        if not inside_tool.get():
            reserve_turn(self.guard, agent, response)
        if self.inner is not None:
            await self.inner.on_llm_end(context, agent, response)


def _forward(name: str) -> Callable[..., Coroutine[Any, Any, None]]:
    async def forward(self: GuardHooks, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await getattr(self.inner, name)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    return forward


# Every other event goes straight to the user's hooks, also events a later SDK adds.
for _name in [n for n in vars(AgentHooksBase) if n.startswith("on_") and n != "on_llm_end"]:
    setattr(GuardHooks, _name, _forward(_name))


# The call ids each open trajectory has already numbered. A turn resumed after an approval
# may replay on_llm_end; its calls that already ran must not take a second step.
_numbered: WeakKeyDictionary[tg.Trajectory, set[str]] = WeakKeyDictionary()
_numbered_lock = threading.Lock()  # runs in several threads (run_sync) share the mapping


def reserve_turn(guard: tg.Guard, agent: Agent[Any], response: ModelResponse) -> None:
    """Reserve steps for the turn's calls to ``guard``'s tools and to tools the agent lacks,
    in emission order; record the latter as the framework's rejections."""
    calls = [item for item in response.output if isinstance(item, ResponseFunctionToolCall)]
    if not calls:
        return
    traj = tg.current_trajectory()
    if traj is None:
        numbered: set[str] = set()
    else:
        with _numbered_lock:
            numbered = _numbered.setdefault(traj, set())
    guarded, known = _tool_names(guard, agent)
    # With MCP servers the agent's tools are only known at run time: a name missing from
    # agent.tools may be one of theirs, so nothing is called unknown.
    judge_unknown = not agent.mcp_servers
    ids: list[str] = []
    unknown = []
    for call in calls:
        if call.call_id in numbered:
            continue
        if call.name in guarded:
            ids.append(call.call_id)
        elif judge_unknown and call.name not in known:
            ids.append(call.call_id)
            unknown.append(call)
    numbered.update(ids)
    if traj is not None and ids:
        traj.reserve(ids)
    for call in unknown:
        guard.record_rejection(
            call.name,
            f"agent {agent.name!r} has no tool named {call.name!r}; the SDK refused the call",
            model_message=f"Tool '{call.name}' not found.",
            call_id=call.call_id,
            trajectory=traj,
        )


def _tool_names(guard: tg.Guard, agent: Agent[Any]) -> tuple[set[str], set[str]]:
    # Read at every turn, not cached: hooks may change an agent's tools between turns.
    guarded: set[str] = set()
    known: set[str] = set()
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            known.add(tool.name)
            if guarded_by(tool) is guard:
                guarded.add(tool.name)
    for handoff in agent.handoffs:
        if isinstance(handoff, Handoff):
            known.add(handoff.tool_name)
        else:
            known.add(Handoff.default_tool_name(handoff))
    if agent.output_type is not None:
        known.add("json_tool_call")  # the SDK's own stand-in for structured output
    return guarded, known
