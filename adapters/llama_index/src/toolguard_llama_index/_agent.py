"""guard_agent: a FunctionAgent, ReActAgent or AgentWorkflow whose tool calls the guard checks,
one trajectory per run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

import toolguard as tg
from llama_index.core.agent.workflow import AgentWorkflow
from llama_index.core.agent.workflow.base_agent import BaseWorkflowAgent
from llama_index.core.base.llms.types import TextBlock
from llama_index.core.llms import ChatMessage
from llama_index.core.workflow import Context

from . import _run, _stored
from ._tools import ToolErrors, as_tool, check_contract_names, guard_tools, is_guarded

A = TypeVar("A", BaseWorkflowAgent, AgentWorkflow)
TrajectorySource: TypeAlias = "tg.Trajectory | Callable[[], tg.Trajectory | None] | None"
Labels: TypeAlias = "Mapping[str, Any] | None"
_MARK = "_toolguard_guarded"
_log = logging.getLogger("toolguard")


def guard_agent(
    agent: A,
    guard: tg.Guard,
    *,
    contracts: Mapping[str, tg.ToolOptions] | None = None,
    tool_errors: ToolErrors = "deliver",
    trajectory: TrajectorySource = None,
    trajectory_id: Callable[[], str | None] | None = None,
    labels: Labels = None,
    success: Callable[[Any], bool | None] | None = None,
    observe_prompt: bool = True,
    history: bool = True,
) -> A:
    """Guard ``agent`` (a ``FunctionAgent``, ``ReActAgent``, ``CodeActAgent`` or an
    ``AgentWorkflow`` of them) in place and return it.

    Its tools become guarded tools (declared now, with the JSON Schema the model is shown and
    their contract from ``contracts``); each model turn's calls take their steps in emission
    order and calls to tools the agent does not have are counted (``schema``); each
    ``agent.run(...)`` is one trajectory: ``trajectory`` (a :class:`toolguard.Trajectory` or
    a function returning one) as given, else the one current where ``run`` is called, else a
    new one (id ``trajectory_id()``, ``labels``, outcome ``success(result)``), ended when the
    run's handler is done. A run that goes on a conversation (the same ``ctx=`` or
    ``memory=`` as an earlier run) binds what the earlier runs' tools returned
    (``history=False`` turns it off); the user's message is observed for the information
    check (``observe_prompt=False`` turns it off).
    """
    if not isinstance(guard, tg.Guard):
        raise TypeError(f"guard_agent needs a toolguard.Guard, got {type(guard).__name__}")
    if tool_errors not in ("deliver", "raise"):
        raise ValueError(f"tool_errors must be 'deliver' or 'raise', not {tool_errors!r}")
    if isinstance(agent, AgentWorkflow):
        agents: Sequence[BaseWorkflowAgent] = list(agent.agents.values())
    elif isinstance(agent, BaseWorkflowAgent):
        agents = [agent]
    else:
        raise TypeError(
            f"guard_agent takes a LlamaIndex workflow agent or AgentWorkflow, got {agent!r}"
        )
    if getattr(agent, _MARK, False):
        return agent
    # Every agent's tools, known before any is guarded: a bad contract changes nothing.
    tools = {id(one): [as_tool(t) for t in one.tools or ()] for one in agents}
    check_contract_names(contracts or {}, [t for ts in tools.values() for t in ts])
    for one in agents:
        if one.tools:
            one.tools = list(
                guard_tools(tools[id(one)], guard, contracts=contracts, tool_errors=tool_errors)
            )
        _patch(one, "take_step", _take_step(one.take_step, guard))
    episodes = _Episodes(guard, trajectory, trajectory_id, labels, success, observe_prompt, history)
    _patch(agent, "run", episodes.wrap(agent.run))
    _patch(agent, _MARK, True)
    return agent


def _patch(target: Any, name: str, value: Any) -> None:
    # The agents are pydantic models and workflows whose fields are fixed: the instance
    # attribute shadows the class's method for this agent only.
    object.__setattr__(target, name, value)


def _take_step(original: Callable[..., Any], guard: tg.Guard) -> Callable[..., Any]:
    async def take_step(ctx: Context, llm_input: list[ChatMessage], tools: Any, memory: Any) -> Any:
        run = _run.CURRENT.get()
        if run is not None:
            await _stored.sync(run, ctx, guard)
        output = await original(ctx, llm_input, tools, memory)
        calls = getattr(output, "tool_calls", None)
        if run is not None and calls:
            _turn(run, guard, calls, {t.metadata.get_name(): t for t in tools})
        return output

    return take_step


def _turn(run: _run.Run, guard: tg.Guard, calls: Sequence[Any], offered: Mapping[str, Any]) -> None:
    """The model's calls of one turn, before any runs: steps in emission order for the calls
    of guarded tools and of names the agent has no tool for (LlamaIndex answers those itself:
    counted here as ``schema``). The agent's own tools (a handoff) are no steps."""
    counted = [c for c in calls if c.tool_name not in offered or is_guarded(offered[c.tool_name])]
    if len(counted) > 1 and not run.nested:
        run.traj.reserve([c.tool_id for c in counted])
    run.add_turn(
        [(c.tool_id, c.tool_name, c.tool_kwargs) for c in counted if c.tool_name in offered]
    )
    for call in counted:
        if call.tool_name not in offered:
            shown = call.tool_name if len(call.tool_name) <= 128 else call.tool_name[:128] + "…"
            guard.record_rejection(
                call.tool_name,
                f"LlamaIndex has no tool named {shown!r} for this agent",
                check="schema.tool",
                call_id=call.tool_id,
                trajectory=run.traj,
            )


class _Episodes:
    """Opens a trajectory when ``run`` is called and ends it when the run's handler is done."""

    def __init__(
        self,
        guard: tg.Guard,
        trajectory: TrajectorySource,
        trajectory_id: Callable[[], str | None] | None,
        labels: Labels,
        success: Callable[[Any], bool | None] | None,
        observe_prompt: bool,
        history: bool,
    ) -> None:
        self.guard = guard
        self.trajectory = trajectory
        self.trajectory_id = trajectory_id
        self.labels = labels
        self.success = success
        self.observe_prompt = observe_prompt
        self.history = history
        # What each conversation's runs returned, by the id of the conversation's Context or
        # memory (pydantic models are not hashable), dropped when that object is collected.
        self._conversations: dict[int, list[tuple[str, Any]]] = {}
        # The Contexts of the runs in progress (a paused one resumed with its Context is the
        # same run).
        self._live: weakref.WeakSet[Context] = weakref.WeakSet()

    def wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            ctx = kwargs.get("ctx") or next((a for a in args if isinstance(a, Context)), None)
            if ctx is not None and ctx.is_running and ctx in self._live:
                return original(*args, **kwargs)  # a paused run resumed: the same trajectory
            # A running Context no run of this process holds (stored while it waited for an
            # event, loaded back): its calls are a run of their own, counted in a trajectory.
            state = self._begin(args, kwargs, ctx)
            token = _run.CURRENT.set(state)
            try:
                # Current while the run's workflow tasks are made: they copy this context.
                with state.traj.activate():
                    handler = original(*args, **kwargs)
            except BaseException as exc:
                self._end(state, None, exc)
                raise
            finally:
                _run.CURRENT.reset(token)
            # The run's end, before the code awaiting the handler resumes (it may end the
            # trajectory right then): the handler's own result task, where there is one.
            result_task = getattr(handler, "_result_task", None)
            if isinstance(result_task, asyncio.Future):
                result_task.add_done_callback(lambda _: self._close_unstarted(state))
            live = getattr(handler, "ctx", None)
            if isinstance(live, Context):
                self._live.add(live)
            follower = asyncio.get_running_loop().create_task(self._follow(state, handler))
            _FOLLOWERS.add(follower)  # a task nothing references may be collected mid-way
            follower.add_done_callback(_FOLLOWERS.discard)
            return handler

        return run

    def _begin(self, args: tuple[Any, ...], kwargs: dict[str, Any], ctx: Any) -> _run.Run:
        traj, owned = self._choose()
        # A run a guarded tool started (an agent used as a tool) counts in that tool's
        # trajectory, where the core takes its calls as nested: no steps, so none reserved.
        state = _run.Run(traj, owned, nested=_run.RUNNING.get() is traj, keep=self.history)
        if owned:
            tg.end_at_exit(traj)  # a handler never awaited still ends at exit
        if self.observe_prompt:
            user_msg = kwargs.get(
                "user_msg", args[0] if args and not isinstance(args[0], Context) else None
            )
            for text in _texts([user_msg, *(kwargs.get("chat_history") or ())]):
                traj.observe(text)
        conversation = _conversation(args, kwargs, ctx)
        if conversation is not None:
            # The conversation's own list: this run's results go there as its tools return,
            # so a next run started the moment this one is awaited finds them.
            earlier = self._results_of(conversation)
            if self.history:
                for name, result in list(earlier):
                    if self.guard.has_tool(name):
                        traj.bind_result(self.guard.get_tool(name), result)
                # A Context not seen in this process (loaded back from ctx.to_dict()): its
                # state holds what the earlier runs found, read at the first model turn.
                state.restore = ctx is not None and not earlier
            state.results = earlier
            # Given the Context, the earlier runs kept theirs in its state; a run on a memory
            # alone has a new Context, where the whole conversation's results go.
            state.saved = len(earlier) if ctx is not None else 0
        return state

    def _results_of(self, conversation: Any) -> list[tuple[str, Any]]:
        key = id(conversation)
        found = self._conversations.get(key)
        if found is None:
            found = []
            try:
                weakref.finalize(conversation, self._conversations.pop, key, None)
            except TypeError:  # no weak reference to it: its id could be reused later
                return found
            self._conversations[key] = found
        return found

    def _choose(self) -> tuple[tg.Trajectory, bool]:
        given = self.trajectory() if callable(self.trajectory) else self.trajectory
        return tg.run_trajectory(
            given,
            lambda: self.guard.trajectory(
                self.trajectory_id() if self.trajectory_id is not None else None,
                labels=self.labels,
            ),
        )

    async def _follow(self, state: _run.Run, handler: Any) -> None:
        """Wait for the run's end (the handler is awaitable more than once) and end it."""
        try:
            result = await handler
        except BaseException as exc:  # the run failed or was cancelled: success unknown
            self._live.discard(handler.ctx)
            self._end(state, None, exc)
            if not isinstance(exc, Exception):
                raise
            return
        self._live.discard(handler.ctx)
        self._end(state, result, None)

    def _close_unstarted(self, state: _run.Run) -> None:
        """End the calls the model emitted that never ran: checked (a call the guard would
        block is recorded so), then cancelled, each with its step (reserved, or the next
        one for a lone call), so T has a verdict per step."""
        for call in state.take_unstarted():
            if state.traj.ended:
                return
            try:
                self.guard.cancel_unstarted(
                    call.name, dict(call.kwargs), call_id=call.call_id, trajectory=state.traj
                )
            except Exception:  # never mask how the run ended, nor crash the agent
                _log.exception("toolguard: closing the unstarted call to %r failed", call.name)

    def _end(self, state: _run.Run, result: Any, error: BaseException | None) -> None:
        self._close_unstarted(state)  # no-op where the handler's result task did it
        if not state.owned:
            return
        if error is None and self.success is not None:
            with contextlib.suppress(Exception):  # a failing judge leaves the outcome unknown
                state.traj.success = self.success(result)
        state.traj.end(error)


def _conversation(args: tuple[Any, ...], kwargs: dict[str, Any], ctx: Any) -> Any:
    """The object a conversation's runs share: the Context passed in, else the memory."""
    if ctx is not None:
        return ctx
    return kwargs.get("memory") or (args[2] if len(args) > 2 else None)


def _texts(messages: Sequence[Any]) -> list[str]:
    out = []
    for message in messages:
        if isinstance(message, str):
            out.append(message)
        elif isinstance(message, ChatMessage) and str(message.role.value) == "user":
            out.extend(b.text for b in message.blocks if isinstance(b, TextBlock) and b.text)
    return out


# The tasks that wait for a run's end (a reference keeps each alive until it is done).
_FOLLOWERS: set[asyncio.Task[None]] = set()
