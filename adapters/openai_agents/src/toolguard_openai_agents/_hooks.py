"""Agent hooks that number a model turn's tool calls before any of them runs.

The SDK runs a turn's function calls as concurrent tasks, so the order in which the guard
sees them is the order the tasks happen to get there. ``on_llm_end`` fires after the model
answered and before any tool task is created: it reserves the trajectory's steps for the
turn's call ids in the order the model emitted them, and records the calls the SDK is about
to refuse because the agent has no such tool (a ``ModelBehaviorError``, or the "not found"
message with ``tool_not_found_behavior="return_error_to_model"``), so that T counts them.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Collection, Coroutine
from typing import Any
from weakref import WeakKeyDictionary, WeakSet

import toolguard as tg

from ._history import bind_history
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
from ._waiting import CURRENT, Emitted, run_ended, turn_over

logger = logging.getLogger("toolguard")


class GuardHooks(AgentHooks[Any]):
    """The agent's hooks with the guard's turn numbering added; every event is also passed
    on to the hooks the agent already had (``inner``)."""

    def __init__(self, guard: tg.Guard, inner: AgentHooksBase[Any, Any] | None = None) -> None:
        self.guard = guard
        self.inner = inner

    async def on_llm_start(
        self, context: Any, agent: Agent[Any], system_prompt: str | None, input_items: Any
    ) -> None:
        if not inside_tool.get():
            traj = tg.current_trajectory()
            if traj is not None:
                # Before this call's answer: the calls of the run's earlier turns that never
                # reached their tool (a guardrail refused them) end on the state they saw.
                turn_over(traj, context)
            if traj is not None and _first_model_call(traj):
                # The conversation's earlier turns, in the input: their outputs are context.
                bind_history(self.guard, traj, input_items)
        if self.inner is not None:
            await self.inner.on_llm_start(context, agent, system_prompt, input_items)

    async def on_end(self, context: Any, agent: Agent[Any], output: Any) -> None:
        if not inside_tool.get():
            traj = tg.current_trajectory()
            if traj is not None:
                # A final output taken from a tool's (stop_on_first_tool) has no model call
                # after it: the calls the SDK answered without their tool end here.
                run_ended(traj, context)
        if self.inner is not None:
            await self.inner.on_end(context, agent, output)

    async def on_llm_end(self, context: Any, agent: Agent[Any], response: ModelResponse) -> None:
        if not inside_tool.get():
            disabled = await disabled_tools(context, agent, response)
            reserve_turn(self.guard, agent, response, disabled=disabled, context=context)
        if self.inner is not None:
            await self.inner.on_llm_end(context, agent, response)


def _forward(name: str) -> Callable[..., Coroutine[Any, Any, None]]:
    async def forward(self: GuardHooks, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await getattr(self.inner, name)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    return forward


# Every other event goes straight to the user's hooks, also events a later SDK adds.
for _name in [
    n
    for n in vars(AgentHooksBase)
    if n.startswith("on_") and n not in ("on_llm_start", "on_llm_end", "on_end")
]:
    setattr(GuardHooks, _name, _forward(_name))


# The call ids each open trajectory has already numbered. A turn resumed after an approval
# may replay on_llm_end; its calls that already ran must not take a second step.
_numbered: WeakKeyDictionary[tg.Trajectory, set[str]] = WeakKeyDictionary()
_numbered_lock = threading.Lock()  # runs in several threads (run_sync) share the mapping


async def disabled_tools(context: Any, agent: Agent[Any], response: ModelResponse) -> set[str]:
    """The names of the function tools this turn calls that ``is_enabled`` switches off for
    the run: the SDK did not offer them, and refuses their calls as it does unknown names.
    Only the called tools' switches are read (a callable one may cost something)."""
    called = {i.name for i in response.output if isinstance(i, ResponseFunctionToolCall)}
    disabled: set[str] = set()
    for tool in agent.tools:
        if not isinstance(tool, FunctionTool) or tool.name not in called:
            continue
        switch = tool.is_enabled
        if switch is True:
            continue
        try:
            enabled = switch if isinstance(switch, bool) else switch(context, agent)
            if inspect.isawaitable(enabled):
                enabled = await enabled
        except Exception:  # the SDK's own reading of it decides; it raised there already
            logger.exception("toolguard: is_enabled of tool %r raised", tool.name)
            continue
        if not enabled:
            disabled.add(tool.name)
    return disabled


# The trajectories whose first model call has been seen (their history bound once).
_primed: WeakSet[tg.Trajectory] = WeakSet()


def _first_model_call(traj: tg.Trajectory) -> bool:
    with _numbered_lock:
        if traj in _primed:
            return False
        _primed.add(traj)
        return True


def reserve_turn(
    guard: tg.Guard,
    agent: Agent[Any],
    response: ModelResponse,
    *,
    disabled: Collection[str] = (),
    context: object | None = None,
) -> None:
    """Reserve steps for the turn's calls to ``guard``'s tools and to tools the agent lacks,
    in emission order; record the latter as the framework's rejections. ``disabled``: tool
    names switched off for this run (:func:`disabled_tools`), refused like unknown ones.
    ``context``: the hook's run context, which tells this run's turns from another's."""
    calls = [item for item in response.output if isinstance(item, ResponseFunctionToolCall)]
    if not calls:
        return
    traj = tg.current_trajectory()
    if traj is not None and traj.ended:
        # A run left running after its block (a stream abandoned before the model answered):
        # the trajectory's summary is written, no step can be added to it any more.
        traj = None
    if traj is None:
        numbered: set[str] = set()
    else:
        with _numbered_lock:
            numbered = _numbered.setdefault(traj, set())
    guarded, known = _tool_names(guard, agent)
    if disabled:
        guarded.difference_update(disabled)
        known.difference_update(disabled)
    # With MCP servers the agent's tools are only known at run time: a name missing from
    # agent.tools may be one of theirs, so nothing is called unknown.
    judge_unknown = not agent.mcp_servers
    ids: list[str] = []
    checked = []  # the calls the guarded tools will check
    unknown = []
    for call in calls:
        if call.call_id in numbered:
            continue
        if call.name in guarded:
            ids.append(call.call_id)
            checked.append(call)
        elif judge_unknown and call.name not in known:
            ids.append(call.call_id)
            unknown.append(call)
    numbered.update(ids)
    if traj is not None and ids:
        traj.reserve(ids)
        _wait_for(guard, agent, traj, checked, context)
    for call in unknown:
        if call.name in disabled:
            why = f"agent {agent.name!r} has tool {call.name!r} disabled (is_enabled)"
        else:
            why = f"agent {agent.name!r} has no tool named {call.name!r}"
        guard.record_rejection(
            call.name,
            f"{why}; the SDK refused the call",
            check="schema.tool",  # also for a disabled tool the guard knows (not schema.args)
            model_message=f"Tool '{call.name}' not found.",
            call_id=call.call_id,
            trajectory=traj,
        )


def _wait_for(
    guard: tg.Guard,
    agent: Agent[Any],
    traj: tg.Trajectory,
    calls: list[ResponseFunctionToolCall],
    context: object | None,
) -> None:
    """Hand the reserved calls to the run's :class:`Waiting`, which ends the ones that never
    reach their tool. It is told which tools the SDK may hold back on purpose: a call pending
    approval is resumed by a later run, whose call takes the reserved step."""
    waiting = CURRENT.get()
    if waiting is None or waiting.traj is not traj:
        return
    tools = {t.name: t for t in agent.tools if isinstance(t, FunctionTool)}
    emitted = []
    for call in calls:
        tool = tools.get(call.name)
        approval = tool is not None and tool.needs_approval is not False
        guardrails = tool is not None and bool(tool.tool_input_guardrails)
        emitted.append(
            Emitted(call.call_id, call.name, call.arguments, approval, approval or guardrails)
        )
    waiting.add(guard, emitted, run=context)


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
