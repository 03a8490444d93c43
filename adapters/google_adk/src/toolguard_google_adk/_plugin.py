"""ToolGuardPlugin: the ADK plugin that puts a toolguard Guard in front of every tool call."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Literal

import toolguard as tg
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext

from . import _calls, _episode, _tree
from ._orphans import Orphans
from ._runs import CALLER, Run

ToolErrors = Literal["deliver", "raise"]

logger = logging.getLogger("toolguard")


class ToolGuardPlugin(BasePlugin):
    """Checks every tool call of a Runner's agents with ``guard``, one trajectory per
    invocation (one ``run_async`` / ``run`` with a new message).

    ``InMemoryRunner(agent=agent, plugins=[ToolGuardPlugin(guard)])`` (or ``App(plugins=...)``).
    The tools of the whole agent tree are declared to the guard at the first invocation (one
    a toolset lists later at its first call), by the JSON Schema ADK shows the model plus its
    contract from ``contracts`` (tool name -> ``guard.declare`` options: ``refs``,
    ``produces``, ``invalidates``, ``preconditions``, ...), unless the guard already knows a
    tool of that name. A contract naming no tool there fails that invocation (``ValueError``;
    a warning when a toolset may list it later).

    A blocked call is answered ``{"error": message}`` (ADK's own shape for a failed call,
    as for an unknown tool) and the tool does not run. ``tool_errors``: a tool that raises is
    recorded (``state_consistency``) and answered the same way so the agent can recover
    (``"deliver"``, default), or its exception fails the run as ADK would (``"raise"``).

    Trajectories: ``trajectory`` (a :class:`toolguard.Trajectory`, or ``ctx -> Trajectory``)
    is used as given, started and ended by the plugin only if it was not started; else the
    trajectory current where the run starts; else a new one per invocation, with id
    ``trajectory_id(ctx)`` (default the invocation id), ``labels`` (a mapping or ``ctx ->
    mapping``), the session id as conversation id and ``success(ctx)`` as its outcome. The
    user's message is observed for the information check, and the tool results of the
    session's earlier invocations are bound (``history=False`` to turn that off), so a
    multi-turn chat can use an id an earlier turn found.
    """

    def __init__(
        self,
        guard: tg.Guard,
        *,
        name: str = "toolguard",
        contracts: Mapping[str, tg.ToolOptions] | None = None,
        tool_errors: ToolErrors = "deliver",
        trajectory: _episode.TrajectorySource = None,
        trajectory_id: _episode.TrajectoryId = None,
        labels: _episode.Labels = None,
        success: Callable[[InvocationContext], bool | None] | None = None,
        observe_prompt: bool = True,
        history: bool = True,
    ) -> None:
        if not isinstance(guard, tg.Guard):
            raise TypeError(f"ToolGuardPlugin needs a toolguard.Guard, got {type(guard).__name__}")
        if tool_errors not in ("deliver", "raise"):
            raise ValueError(f"tool_errors must be 'deliver' or 'raise', not {tool_errors!r}")
        super().__init__(name)
        self.guard = guard
        self.contracts: Mapping[str, tg.ToolOptions] = dict(contracts or {})
        self.tool_errors: ToolErrors = tool_errors
        self.trajectory = trajectory
        self.trajectory_id = trajectory_id
        self.labels = labels
        self.success = success
        self.observe_prompt = observe_prompt
        self.history = history
        self._declared: set[str] = set()
        # ADK's tools by name (how ADK recorded their results), from every agent tree seen.
        self._tools: dict[str, BaseTool] = {}
        self._returns_dict: dict[str, bool | None] = {}
        self._trees: set[int] = set()  # root agents whose whole tree was declared
        self._runs: dict[str, Run] = {}  # the invocations in progress, by invocation id
        self._watched = False
        # Calls checked outside any run in progress here (the runner closed while their
        # invocation went on), by their ToolContext; ended with their invocation.
        self._orphans = Orphans()

    def __repr__(self) -> str:
        return f"ToolGuardPlugin({self.guard!r}, name={self.name!r})"

    # -- the invocation ------------------------------------------------------------------------
    async def before_run_callback(self, *, invocation_context: InvocationContext) -> None:
        ctx = invocation_context
        if not self._watched:
            _watch(self)
            self._watched = True
        caller = self._runs.get(CALLER.get() or "")
        if caller is not None:
            # A sub-agent called as a tool: its calls are steps of the caller's trajectory,
            # which already holds what it found and saw (the request is the caller model's
            # own text, not something seen).
            self._runs[ctx.invocation_id] = Run(caller.traj, False, caller=caller)
            return
        await self._know_tree(ctx)  # before the trajectory starts: a bad contract raises
        if self._runs.get(ctx.invocation_id) is not None:
            # A resumable app's run resuming an invocation whose interrupted run (cancelled:
            # no callback ended it) is still open here: that run ends now, with its summary
            # and every call of it, instead of being dropped for this one.
            interrupted = self._end_run(ctx.invocation_id)
            if interrupted is not None and interrupted.owned:
                interrupted.traj.end()
        traj, owned = _episode.choose(
            self.guard, ctx, self.trajectory, self.trajectory_id, self.labels
        )
        self._runs[ctx.invocation_id] = Run(traj, owned)
        if self.observe_prompt:
            for text in _episode.texts(ctx.user_content):
                traj.observe(text)
        await self._bind_results(ctx, traj)

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        run = self._end_run(invocation_context.invocation_id)
        if run is None:
            return
        if run.owned:
            if self.success is not None:
                run.traj.success = self.success(invocation_context)
            run.traj.end()

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        run = self._end_run(invocation_context.invocation_id)
        if run is not None and run.owned:
            run.traj.end(error)  # the summary, success unknown, the error's type on it

    async def close(self) -> None:
        self.end_open()

    def end_open(self) -> None:
        """End the trajectories of invocations that never finished (a run cancelled, the
        caller stopped iterating its events): at runner close and at interpreter exit."""
        for key in list(self._runs):
            run = self._end_run(key)
            if run is not None and run.owned:
                run.traj.end()
        self._orphans.end(None)

    def _end_run(self, key: str) -> Run | None:
        """The run of invocation ``key``, no longer in progress, every call of it given its
        verdict before its summary: those of the sub-agents' runs inside it (AgentTool calls)
        that never ended, cancelled with it (ADK runs no callback of theirs then), first; and
        the invocation's calls checked after its run had ended (the runner closed)."""
        ended = {key}
        run = self._runs.pop(key, None)
        if run is not None:
            for inner_key, inner in list(self._runs.items()):
                if inner.inside(run) and self._runs.pop(inner_key, None) is not None:
                    ended.add(inner_key)
                    inner.settle(self.guard)
            run.settle(self.guard)
        self._orphans.end(ended)
        return run

    # -- a model turn --------------------------------------------------------------------------
    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> None:
        # The model's event reaches the runner, with ADK's call ids, before any of its calls
        # runs: steps by call id in emission order, whatever order the calls finish in. A
        # partial event (a streaming model's) carries the calls again in the final one, with
        # ids of their own: only the final one's run.
        if event.content is None or event.partial:
            return None
        if run := self._runs.get(invocation_context.invocation_id):
            run.reserve(event.get_function_calls())
            if run.pending:
                self._answered_elsewhere(run, event)
        return None

    def _answered_elsewhere(self, run: Run, event: Event) -> None:
        """Close the admitted calls this event answers: their answer reached the model
        without this plugin's after-tool (or tool-error) callback, because a plugin before
        it answered there and ADK asks no later one. The answer the model got is the
        call's result, judged and recorded as the tool's would be, before the run's
        summary; left open, the call was cancelled when dropped, after the summary, as if it
        had not run."""
        actions = event.actions
        paused = {*actions.requested_tool_confirmations, *actions.requested_auth_configs}
        # An event with an error code is ADK's own answer, not a tool's: the calls an aborted
        # invocation left unanswered (its abort_signal set) are sealed with
        # INVOCATION_ABORTED, and never ran.
        aborted = event.error_code is not None
        for response in event.get_function_responses():
            open_call = run.pending.get(response.id or "")
            if open_call is None or open_call.name != response.name:
                continue  # a model's own ids may repeat: the same call has the same tool
            pending = run.take(open_call.call_id or "")
            if pending is None or pending.done:
                continue
            if aborted or response.id in paused:
                pending.cancel()  # a paused call, as after_tool_callback does: resumed anew
                continue
            answer = response.response if isinstance(response.response, dict) else {}
            pending.finish(_episode.unwrap(answer, self._returned_dict(pending.name)))

    # -- one call ------------------------------------------------------------------------------
    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        guard = self.guard
        run = self._runs.get(tool_context.invocation_id)
        traj = run.traj if run is not None else None
        call_id = tool_context.function_call_id
        if run is not None and call_id is not None:
            run.unclaimed.pop(call_id, None)
        if _calls.is_unknown(tool):
            # ADK answers it itself (the tools the model can call); the step is counted here.
            guard.record_rejection(
                tool.name,
                f"ADK has no tool named {_calls.shorten(tool.name)!r}",
                check="schema.tool",
                call_id=call_id,
                trajectory=traj,
            )
            return None
        self._know(tool)
        pending = guard.check(
            tool.name,
            tool_args,
            call_id=call_id,
            trajectory=traj,
            span=_calls.framework_span(guard, tool),
        )
        if pending.rejection is not None:
            return {"error": str(pending.rejection)}
        if run is not None and call_id is not None:
            run.pending[call_id] = pending
            if isinstance(tool, AgentTool):
                run.callers[call_id] = CALLER.set(tool_context.invocation_id)
        else:
            self._orphans.add(tool_context, pending)
        return None

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: Any,
    ) -> dict[str, Any] | None:
        pending = self._take(tool_context)
        if pending is None:  # blocked, or not checked by this plugin
            return None
        why = _calls.refusal(tool, result)
        if why is not None:
            # FunctionTool refused the arguments and the function never ran: schema, as in
            # every adapter; the model gets ADK's own message.
            pending.reject(tg.Failure("schema", "schema.args", why, why))
        elif _calls.denied(tool_context, result):
            pending.cancel()  # the client denied its confirmation: the tool never ran
        elif (
            tool_context.actions.requested_tool_confirmations
            or tool_context.actions.requested_auth_configs
        ):
            pending.cancel()  # paused for a confirmation or credentials: resumed as a new call
        else:
            pending.finish(result)
        return None

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        pending = self._take(tool_context)
        if pending is None:  # an unknown name (counted already), or not checked here
            return None
        rejection = pending.fail(error)  # a cancellation is recorded as cancelled
        if self.tool_errors == "deliver" and not isinstance(error, asyncio.CancelledError):
            return {"error": str(rejection)}
        return None

    # -- helpers -------------------------------------------------------------------------------
    def _take(self, tool_context: ToolContext) -> tg.PendingCall | None:
        run = self._runs.get(tool_context.invocation_id)
        call_id = tool_context.function_call_id
        if run is not None and call_id is not None:
            return run.take(call_id)
        return self._orphans.take(tool_context)

    def _know(self, tool: BaseTool) -> None:
        if tool.name not in self._declared:
            _calls.declare(self.guard, tool, self.contracts)
            self._declared.add(tool.name)
            self._tools.setdefault(tool.name, tool)

    async def _know_tree(self, ctx: InvocationContext, *, again: bool = False) -> None:
        """Declare the tools of the whole agent tree at its first run (the agent that runs may
        be a sub-agent a transfer reached, whose history holds the root's results), and say
        which contracts name none of them: such a contract is never applied, so its tool's
        calls run unchecked."""
        top = _tree.root(ctx)
        if top is None or (id(top) in self._trees and not again):
            return  # a workflow node: its tools are declared at their first call
        tools = await _tree.tree_tools(ctx, top)
        for tool in tools.found.values():
            self._know(tool)
        if id(top) not in self._trees:
            self._check_contract_names(tools.complete)
            self._trees.add(id(top))

    def _check_contract_names(self, complete: bool) -> None:
        names = {*self._tools, *(n for n in self.contracts if self.guard.has_tool(n))}
        why = _tree.unknown_contracts(self.contracts, names)
        if why is None:
            return
        if complete:
            raise ValueError(why)
        # A toolset may list that tool later (its list can depend on the session): said once.
        logger.warning("toolguard: %s, unless a toolset lists it later", why)

    def _returned_dict(self, name: str) -> bool | None:
        if name not in self._returns_dict:
            tool = self._tools.get(name)
            self._returns_dict[name] = _calls.returns_dict(tool) if tool is not None else None
        return self._returns_dict[name]

    async def _bind_results(self, ctx: InvocationContext, traj: tg.Trajectory) -> None:
        """Bind what the tool results the model has before this run's first call produce: the
        session's (``history``), and always those the new message carries (a long-running
        tool's final result, sent by the client as the next message)."""
        results = list(_episode.sent(ctx))
        if self.history:
            results += _episode.results_before(ctx)  # the message again: binding is idempotent
            if self.observe_prompt:
                for text in _episode.earlier_texts(ctx):
                    traj.observe(text)
        if any(not self.guard.has_tool(name) for name, _ in results):
            await self._know_tree(ctx, again=True)  # a tool its toolset lists only now
        error_result = self.guard.error_result
        for name, response in results:
            if not self.guard.has_tool(name):
                continue  # a tool this agent no longer has
            result = _episode.unwrap(response, self._returned_dict(name))
            if error_result and error_result(result):
                continue  # a refused call's answer binds nothing
            traj.bind_result(self.guard.get_tool(name), result)


# Every plugin alive, to end its open trajectories at interpreter exit (a run cancelled or
# dropped mid-way still writes its summary).
_LIVE: weakref.WeakSet[ToolGuardPlugin] = weakref.WeakSet()
_EXIT_LOCK = threading.Lock()
_exit_hook: list[bool] = []


def _watch(plugin: ToolGuardPlugin) -> None:
    # Registered at the first run rather than at import: atexit runs last-registered first,
    # so this runs before the exit hooks of the tracer providers and span files set up at
    # start-up, which then still export the summaries it writes.
    with _EXIT_LOCK:
        _LIVE.add(plugin)
        if not _exit_hook:
            atexit.register(_end_at_exit)
            _exit_hook.append(True)


def _end_at_exit() -> None:
    for plugin in list(_LIVE):
        with contextlib.suppress(Exception):  # telemetry trouble never breaks the exit
            plugin.end_open()
