"""ToolGuard: the Pydantic AI capability that puts a toolguard Guard in front of every tool."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import toolguard as tg
from pydantic import ValidationError
from pydantic_ai import CallToolsNode, DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import (
    AgentNode,
    NodeResult,
    RawToolArgs,
    ValidatedToolArgs,
    WrapRunHandler,
    WrapToolExecuteHandler,
)
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import ToolDefinition

from . import _calls, _contracts, _deferred, _episode, _history, _turns
from ._calls import Delivery, ToolErrors

_DELIVERIES = ("failed", "return", "retry")
_log = logging.getLogger("toolguard")


@dataclass(slots=True)
class _Run:
    """One agent run in progress: its trajectory, the calls of its running turn, and the call
    ids of that turn a hook has recorded."""

    traj: tg.Trajectory
    settled: set[str] = field(default_factory=set)
    turn: list[ToolCallPart] = field(default_factory=list)  # the calls of the running turn
    reserved: bool = False  # the running turn's calls have steps reserved
    turn_ctx: RunContext[Any] | None = None  # the running turn's context: its tools
    # The model's response whose turn has not run yet: the app may stop driving the run
    # (agent.iter left) before it does, and its calls are still the model's.
    unrun: tuple[RunContext[Any], CallToolsNode[Any, Any]] | None = None
    offered: list[ToolDefinition] = field(default_factory=list)  # this step's function tools
    outputs: list[ToolDefinition] = field(default_factory=list)  # and its output tools
    history: bool = False  # the earlier turns' tool returns are still to be bound
    tools_checked: bool = False  # the contracts were checked against the agent's tools
    nested: bool = False  # started by a guarded tool of this trajectory: its calls are no steps


class ToolGuard(AbstractCapability[Any]):
    """Checks every tool call of an agent with ``guard``, one trajectory per agent run.

    ``Agent(model, tools=[...], capabilities=[ToolGuard(guard)])``. The agent's tools are
    declared to the guard on their first call, with their contract from ``contracts``
    (tool name -> ``guard.declare`` options: ``refs``, ``produces``, ``invalidates``,
    ``preconditions``, ...), unless the guard already knows a tool of that name. Their shape
    is checked here, their tool and argument names at each run's first model request.

    ``rejection``: how a blocked call answers the model. ``"failed"`` (default): a failed
    tool return (``ToolFailed``: the provider's error channel; no retry budget used);
    ``"return"``: the message as a plain tool result; ``"retry"``: ``ModelRetry``, which
    counts against the tool's ``retries`` like any retry. ``tool_errors``: a tool that
    raises is recorded (``state_consistency``) and its rejection delivered the same way
    (``"deliver"``, default), or its exception propagates as Pydantic AI would let it
    (``"raise"``).

    Trajectories: ``trajectory`` (a :class:`toolguard.Trajectory`, or ``ctx -> Trajectory``)
    is used as given, started and ended by the adapter only if it was not started; else the
    trajectory current where the run starts; else a new one per run, with id
    ``trajectory_id(ctx)`` (default the run id), ``labels`` (a mapping or ``ctx -> mapping``),
    the prompt (and the earlier turns' user prompts) observed for the information check, and
    ``success(result)`` as its outcome.
    """

    def __init__(
        self,
        guard: tg.Guard,
        *,
        contracts: Mapping[str, tg.ToolOptions] | None = None,
        rejection: Delivery = "failed",
        tool_errors: ToolErrors = "deliver",
        trajectory: _episode.TrajectorySource = None,
        trajectory_id: _episode.TrajectoryId = None,
        labels: _episode.Labels = None,
        success: Callable[[AgentRunResult[Any]], bool | None] | None = None,
        observe_prompt: bool = True,
    ) -> None:
        if not isinstance(guard, tg.Guard):
            raise TypeError(f"ToolGuard needs a toolguard.Guard, got {type(guard).__name__}")
        if rejection not in _DELIVERIES:
            raise ValueError(f"rejection must be one of {_DELIVERIES}, not {rejection!r}")
        if tool_errors not in ("deliver", "raise"):
            raise ValueError(f"tool_errors must be 'deliver' or 'raise', not {tool_errors!r}")
        self.guard = guard
        self.contracts: Mapping[str, tg.ToolOptions] = _contracts.checked(contracts)
        self.rejection: Delivery = rejection
        self.tool_errors: ToolErrors = tool_errors
        self.trajectory = trajectory
        self.trajectory_id = trajectory_id
        self.labels = labels
        self.success = success
        self.observe_prompt = observe_prompt
        # Names known to be declared on the guard: shared by every run of this capability.
        self._declared: set[str] = set()
        self._runs: dict[str, _Run] = {}  # the runs in progress, by run id

    # The base is a dataclass comparing its fields: two guards must never compare equal.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"ToolGuard({self.guard!r}, rejection={self.rejection!r})"

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live Guard: not constructible from an agent spec

    # -- the episode ---------------------------------------------------------------------------
    async def wrap_run(self, ctx: RunContext[Any], *, handler: WrapRunHandler) -> Any:
        traj, owned = _episode.begin(
            self.guard, ctx, self.trajectory, self.trajectory_id, self.labels, self.observe_prompt
        )
        # Per-run state by run id rather than on a for_run() copy: a copy makes Pydantic AI
        # rebuild the agent's capability chain for every run, which costs more than the guard.
        # The conversation's earlier turns (message_history) are bound at the first turn with
        # tool calls, where the tools are known: also into a trajectory of the user's, which
        # may be one per run; one spanning the conversation has them already, and binding
        # them again changes nothing there (bind_result keeps what it binds, stale ids too).
        if owned:
            tg.end_at_exit(traj)  # a run that dies where wrap_run never returns still ends at exit
        # A run a guarded tool started (agent delegation) counts in that tool's trajectory,
        # where the core takes its calls as nested: no steps, so its turns reserve none.
        run = _Run(traj, history=bool(ctx.messages), nested=_calls.RUNNING.get() is traj)
        key = ctx.run_id
        if key is not None:
            self._runs[key] = run
        try:
            if not owned:
                # The user's trajectory: current for the run (call spans nest below its summary
                # span), ended by its owner.
                with traj.activate():
                    return await self._handle(run, handler)
            with traj:  # an exception or cancellation ends it too, recorded on the summary
                result = await self._handle(run, handler)
                if self.success is not None:
                    traj.success = self.success(result)
                return result
        finally:
            if key is not None:
                self._runs.pop(key, None)

    async def _handle(self, run: _Run, handler: WrapRunHandler) -> Any:
        try:
            return await handler()
        finally:
            # However the run ends (a cancelled task, a stream the app stopped reading, an
            # exception), the turn it was in has steps reserved that no call will take now:
            # each ends as cancelled, before the trajectory ends, so T has a verdict per step.
            if run.unrun is not None:
                self._left_unrun(run, *run.unrun)
            calls, run.turn = run.turn, []
            self._cancel_unclaimed(run, [c for c in calls if c.tool_call_id not in run.settled])

    # -- the agent's tools ---------------------------------------------------------------------
    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        # The first place a run knows its tools (decorators run after the Agent was built,
        # toolsets may be given per run): the contracts are checked here, before any call.
        run = self._run(ctx)
        if run is not None:
            run.offered = tool_defs
            if self.contracts and not run.tools_checked:
                run.tools_checked = True
                self._check_contracts(ctx, tool_defs)
        return tool_defs

    async def prepare_output_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        if (run := self._run(ctx)) is not None:
            run.outputs = tool_defs  # the run's answer, not tool calls
        return tool_defs

    def _check_contracts(self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]) -> None:
        shown = {d.name for d in tool_defs}
        _contracts.check_names(self.contracts, shown | _contracts.agent_tool_names(ctx))
        for tool_def in tool_defs:
            if tool_def.name in self.contracts and tool_def.name not in self._declared:
                # Declared now, so a contract naming an argument the tool lacks fails here.
                self._declare(tool_def.name, tool_def)

    # -- a model turn --------------------------------------------------------------------------
    # before/after_node_run rather than wrap_node_run: Pydantic AI calls these for every
    # capability anyway, while one wrap_node_run anywhere puts every node of every run through
    # its wrapping machinery.
    async def before_node_run(
        self, ctx: RunContext[Any], *, node: AgentNode[Any]
    ) -> AgentNode[Any]:
        if isinstance(node, CallToolsNode) and (run := self._run(ctx)) is not None:
            self._start_turn(run, ctx, node)
        return node

    def _start_turn(self, run: _Run, ctx: RunContext[Any], node: CallToolsNode[Any, Any]) -> None:
        run.unrun = None
        if run.history:
            run.history = False
            self._bind_history(ctx, run.traj)
        # Call ids are unique within a turn only (some OpenAI-compatible servers send
        # call_0, call_1, ... every turn): what a hook recorded is per turn.
        run.settled = set()
        run.turn = _turns.turn_calls(ctx, node, run.traj)
        run.turn_ctx = ctx
        run.reserved = len(run.turn) > 1 and not run.nested
        if run.reserved:
            # Steps by call id in emission order, whatever order the tasks run in (a lone
            # call takes the next step when it is checked, which is the same one).
            run.traj.reserve([call.tool_call_id for call in run.turn])

    def _left_unrun(self, run: _Run, ctx: RunContext[Any], node: CallToolsNode[Any, Any]) -> None:
        """The turn the model answered with and the run never ran (the app left agent.iter
        there): its calls take their steps, to end as cancelled. Which are the agent's tool
        calls is read from the step's tool definitions: the run's tool manager is not
        prepared for that step outside it."""
        run.unrun = None
        offered = {d.name: d for d in run.offered}
        outputs = {d.name for d in run.outputs}
        if run.history:  # as at a turn that runs: a call is judged with what it was shown
            run.history = False
            for name in _history.returned_tools(ctx.messages):
                if name in offered and name not in self._declared:
                    self._declare(name, offered[name])
            _history.bind_history(self.guard, run.traj, ctx.messages)
        calls = []
        for call in node.model_response.tool_calls:
            tool_def = offered.get(call.tool_name)
            if tool_def is None and call.tool_name not in outputs:
                calls.append(call)  # a name Pydantic AI would have refused
            elif tool_def is not None and tool_def.kind == "function":
                if call.tool_name not in self._declared:
                    self._declare(call.tool_name, tool_def)
                calls.append(call)
        run.settled = set()
        run.turn = calls
        run.turn_ctx = None
        run.reserved = len(calls) > 1 and not run.nested
        if run.reserved:
            run.traj.reserve([call.tool_call_id for call in calls])

    async def after_node_run(
        self, ctx: RunContext[Any], *, node: AgentNode[Any], result: NodeResult[Any]
    ) -> NodeResult[Any]:
        if isinstance(node, CallToolsNode):
            self._settle_turn(ctx, result)
        elif isinstance(result, CallToolsNode) and (run := self._run(ctx)) is not None:
            run.unrun = (ctx, result)  # the model answered: its turn is next
        return result

    async def on_node_run_error(
        self, ctx: RunContext[Any], *, node: AgentNode[Any], error: Exception
    ) -> NodeResult[Any]:
        if isinstance(node, CallToolsNode):
            self._settle_turn(ctx, None)  # e.g. a tool refused once too often ended the run
        raise error

    def _settle_turn(self, ctx: RunContext[Any], result: NodeResult[Any] | None) -> None:
        """Record the turn's calls Pydantic AI answered before any hook of the guard saw them."""
        run = self._run(ctx)
        if run is None or not run.turn:
            return
        unseen = [c for c in run.turn if c.tool_call_id not in run.settled]
        run.turn = []
        if not unseen:
            return
        for call, check, message in _turns.refused(ctx, result, unseen):
            run.settled.add(call.tool_call_id)
            self.guard.record_rejection(
                call.tool_name, message, check=check, call_id=call.tool_call_id, trajectory=run.traj
            )
        # The rest never started: skipped (a final result came first), or left when a call
        # ended the run. Their reserved steps end as cancelled.
        self._cancel_unclaimed(run, [c for c in unseen if c.tool_call_id not in run.settled])

    def _cancel_unclaimed(self, run: _Run, calls: Iterable[ToolCallPart]) -> None:
        """End the steps of ``calls``, which will never run: checked (a call the guard would
        block is recorded so), then cancelled, as the core's run_* helpers do. A lone call
        reserved no step and takes the next one now, as it would have when checked."""
        for call in calls:
            try:
                self._cancel_call(run, call)
            except Exception:  # never mask how the run ended, nor crash the agent
                _log.exception(
                    "toolguard: closing the unstarted call to %r (%s) failed",
                    call.tool_name,
                    call.tool_call_id,
                )

    def _cancel_call(self, run: _Run, call: ToolCallPart) -> None:
        run.settled.add(call.tool_call_id)
        name = call.tool_name
        self._declare_called(name, run.turn_ctx, run.offered)
        # The model's arguments as sent: Pydantic AI never validated them (not started).
        self.guard.cancel_unstarted(name, call.args, call_id=call.tool_call_id, trajectory=run.traj)

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        # The turn's external calls leave the run here, checked while a blocked one can still
        # be answered with the guard's message instead of reaching the app (_deferred.py).
        run = self._run(ctx)
        if run is None:
            return None
        waiting = {c.tool_call_id for c in run.turn} - run.settled  # not a tool's own deferral
        leaving = [c for c in requests.calls if c.tool_call_id in waiting]
        for call in leaving:
            run.settled.add(call.tool_call_id)
            self._declare_called(call.tool_name, ctx, run.offered)
        return _deferred.answers(self.guard, leaving, run.traj, self.rejection)

    # -- one call ------------------------------------------------------------------------------
    async def on_tool_validate_error(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: RawToolArgs,
        error: ValidationError | ModelRetry,
    ) -> ValidatedToolArgs:
        # Pydantic AI refused the arguments and answers the model itself (a retry): the call
        # is still a step, with cause schema. Only failures reach this hook (capabilities
        # listed after this one have declined to recover), so the happy path pays nothing.
        run = self._run(ctx)
        if run is None or call.tool_call_id not in run.settled:
            if run is not None:
                run.settled.add(call.tool_call_id)
            self._declare(call.tool_name, tool_def)
            self.guard.record_rejection(
                call.tool_name,
                _calls.validation_message(call.tool_name, error),
                check="schema.args",
                call_id=call.tool_call_id,
                trajectory=run.traj if run is not None else None,
            )
        raise error

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        guard = self.guard
        name = call.tool_name
        if name not in self._declared:
            self._declare(name, tool_def)
        call_id = call.tool_call_id
        run = self._run(ctx)
        if run is not None:
            run.settled.add(call_id)
        pending = guard.check(
            name,
            _calls.guarded_arguments(guard, name, args),
            call_id=call_id,
            trajectory=run.traj if run is not None else None,
            span=_calls.framework_span(guard, ctx, call_id),
        )
        if pending.rejection is not None:
            return _calls.deliver(pending.rejection, self.rejection)
        return await _calls.run_checked(
            pending,
            lambda: handler(args),
            self.rejection,
            self.tool_errors,
            run.traj if run else None,
        )

    def _bind_history(self, ctx: RunContext[Any], traj: tg.Trajectory) -> None:
        manager = ctx.tool_manager
        for name in _history.returned_tools(ctx.messages):
            if name not in self._declared and manager is not None:
                try:
                    tool_def = manager.get_tool_def(name)
                except (ValueError, AttributeError):  # no longer one of the agent's tools
                    continue
                if tool_def is not None:
                    self._declare(name, tool_def)
        _history.bind_history(self.guard, traj, ctx.messages)

    def _run(self, ctx: RunContext[Any]) -> _Run | None:
        return self._runs.get(ctx.run_id) if ctx.run_id is not None else None

    def _declare_called(
        self, name: str, ctx: RunContext[Any] | None, offered: list[ToolDefinition]
    ) -> None:
        if name not in self._declared and (found := _turns.find_tool_def(ctx, offered, name)):
            self._declare(name, found)  # else the guard records it as the unknown tool it is

    def _declare(self, name: str, tool_def: ToolDefinition) -> None:
        _calls.declare(self.guard, name, tool_def, self.contracts)
        self._declared.add(name)
