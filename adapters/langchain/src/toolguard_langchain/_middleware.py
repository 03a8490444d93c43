"""The agent middleware: every tool call checked, one trajectory per agent run.

``ToolCallGuard`` checks each call (``wrap_tool_call`` / ``awrap_tool_call``) against the
trajectory its caller provides. ``ToolGuardMiddleware`` adds the episode: ``before_agent``
opens the run's trajectory and keeps its key in the agent's state (a private attribute: the
tool node's worker threads and a resumed run find it there), ``after_agent`` sets the outcome
and writes its summary. Every way a ``create_agent`` run ends passes ``after_agent``, except
an exception and an interrupt.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, NotRequired

import toolguard as tg

from . import _ending, _instrumentation
from ._calls import AsyncHandler, GuardedCalls, Handler, active, inside_guarded_call
from ._contracts import KnownTools
from ._framework import (
    AgentMiddleware,
    AgentState,
    GraphBubbleUp,
    HumanMessage,
    PrivateStateAttr,
    ToolCallRequest,
    get_config,
)
from ._history import bind_history
from ._turns import TurnLedger, messages_of

logger = logging.getLogger("toolguard")

STATE_KEY = "toolguard_trajectory"
"""The agent-state key holding the key of the trajectory the middleware opened for a run."""

KeyFunction = Callable[[Mapping[str, Any]], str | None]
Outcome = Callable[[Mapping[str, Any]], bool | None]


class ToolGuardState(AgentState[Any]):
    toolguard_trajectory: NotRequired[Annotated[str | None, PrivateStateAttr]]


def thread_id(config: Mapping[str, Any]) -> str | None:
    """The run's ``configurable.thread_id``: the default key of a trajectory the user opened
    for a whole conversation (``guard.trajectory(..., key=thread_id)``)."""
    configurable = config.get("configurable") or {}
    value = configurable.get("thread_id")
    return None if value is None else str(value)


class ToolCallGuard(AgentMiddleware[AgentState[Any], Any]):
    """Checks every tool call with ``guard``; the trajectory is the caller's.

    An agent middleware with no hook but the tool-call wrappers (so it adds no step to the
    agent's graph), whose ``wrap_tool_call`` / ``awrap_tool_call`` also fit a plain
    ``ToolNode``. A call belongs to, in this order: ``trajectory=``; the trajectory current
    where the agent is invoked (``with guard.trajectory(task_id) as traj: agent.invoke(...)``);
    an open one found by ``trajectory_key(config)`` (default: the thread id). Without any, it
    is checked and traced outside a trajectory.

    ``declare_tools``: a tool the guard does not know is declared from its LangChain schema
    with no dependencies (``False``: the guard rejects it as unknown). ``messages_key``: the
    state key of the messages, for a ``ToolNode`` configured with another.
    """

    def __init__(
        self,
        guard: tg.Guard,
        *,
        trajectory: tg.Trajectory | None = None,
        trajectory_key: KeyFunction | None = thread_id,
        declare_tools: bool = True,
        messages_key: str = "messages",
    ) -> None:
        super().__init__()
        if not isinstance(guard, tg.Guard):
            raise TypeError(f"{type(self).__name__} needs a toolguard.Guard, got {guard!r}")
        self.guard = guard
        self.trajectory = trajectory
        self.trajectory_key = trajectory_key
        self.messages_key = messages_key
        self.ledger = TurnLedger(guard, messages_key)
        self.calls = GuardedCalls(guard, KnownTools(guard, declare_tools), self.ledger)

    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Any:
        traj = self.trajectory_for(request)
        if traj is not None:  # no episode hook to do it once per run
            _instrumentation.mark_langsmith_run(traj.id)
        return self.calls.run(request, handler, traj)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncHandler) -> Any:
        traj = self.trajectory_for(request)
        if traj is not None:
            _instrumentation.mark_langsmith_run(traj.id)
        return await self.calls.arun(request, handler, traj)

    def trajectory_for(self, request: ToolCallRequest) -> tg.Trajectory | None:
        """The trajectory a call belongs to (None inside another guarded call: a sub-agent
        used as a tool is part of that call)."""
        if inside_guarded_call():
            return None
        return self._users(getattr(request.runtime, "config", None))

    def _users(self, config: Mapping[str, Any] | None) -> tg.Trajectory | None:
        if self.trajectory is not None:
            return self.trajectory
        current = tg.current_trajectory()
        if current is not None:
            return current
        if self.trajectory_key is not None and config:
            key = self.trajectory_key(config)
            if key:
                return self.guard.find_trajectory(key)
        return None


class ToolGuardMiddleware(ToolCallGuard):
    """Checks every tool call of the agent with ``guard``; one trajectory per agent run.

    ``labels``: the trajectories' labels (``{"model": ..., "method": ...}``). ``success``:
    ``final_state -> True / False / None``, the run's outcome ``Y``. The trajectory the caller
    provides, as for :class:`ToolCallGuard` (``trajectory=``, current, or by key), takes the
    place of the run's own.

    Put it first in ``middleware=[...]`` (outermost): a blocked call then never reaches a
    retry middleware, and a retried call stays one step.
    """

    state_schema = ToolGuardState

    def __init__(
        self,
        guard: tg.Guard,
        *,
        labels: Mapping[str, Any] | None = None,
        success: Outcome | None = None,
        trajectory: tg.Trajectory | None = None,
        trajectory_key: KeyFunction | None = thread_id,
        declare_tools: bool = True,
        messages_key: str = "messages",
    ) -> None:
        super().__init__(
            guard,
            trajectory=trajectory,
            trajectory_key=trajectory_key,
            declare_tools=declare_tools,
            messages_key=messages_key,
        )
        self.calls.keep_raw = True  # its runs bind what the history's results hold
        self.labels = {str(k): str(v) for k, v in (labels or {}).items()}
        self.success = success
        # The trajectories this middleware opened, by key: looked up on every call, which the
        # guard's registry (where they are also kept, for its bounds and idle timeout) does
        # in time proportional to the number of live trajectories.
        self._own: weakref.WeakValueDictionary[str, tg.Trajectory] = weakref.WeakValueDictionary()
        self._flight = _ending.InFlight()

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self._open(state)

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self._open(state)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self._close(state)

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self._close(state)

    # -- a failing run (_ending.py): an exception leaving these wrappers ends the run ----------
    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Any:
        traj = self.trajectory_for(request)
        if traj is None or not self._opened(request.state):
            return self.calls.run(request, handler, traj)
        self._flight.enter(traj)
        failed: BaseException | None = None
        try:
            return self.calls.run(request, handler, traj)
        except GraphBubbleUp:  # an interrupt or a command: control flow, not a failure
            raise
        except BaseException as exc:
            failed = exc
            raise
        finally:
            self._left(traj, failed)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncHandler) -> Any:
        traj = self.trajectory_for(request)
        if traj is None or not self._opened(request.state):
            return await self.calls.arun(request, handler, traj)
        self._flight.enter(traj)
        failed: BaseException | None = None
        try:
            return await self.calls.arun(request, handler, traj)
        except GraphBubbleUp:
            raise
        except BaseException as exc:  # a cancelled task too: the run is going away
            failed = exc
            raise
        finally:
            self._left(traj, failed)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(request)
        except GraphBubbleUp:
            raise
        except BaseException as exc:
            self._model_failed(request.state, exc)
            raise

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except BaseException as exc:
            self._model_failed(request.state, exc)
            raise

    def _opened(self, state: Any) -> bool:
        return bool(_key_of(state))

    def _left(self, traj: tg.Trajectory, failed: BaseException | None) -> None:
        exc = self._flight.leave(traj, failed)
        if exc is not None:
            self._fail(traj, exc)

    def _model_failed(self, state: Any, exc: BaseException) -> None:
        key = _key_of(state)
        traj = (self._own.get(key) or self.guard.find_trajectory(key)) if key else None
        if traj is not None and not traj.ended:
            self._fail(traj, exc)

    def _fail(self, traj: tg.Trajectory, exc: BaseException) -> None:
        """End a failed run's trajectory: the error on its summary, the outcome unknown."""
        self._own.pop(traj.id, None)
        traj.end(exc)
        self.ledger.forget(traj)

    def trajectory_for(self, request: ToolCallRequest) -> tg.Trajectory | None:
        """The run's own trajectory (by the key in its state), else the caller's."""
        if inside_guarded_call():
            return None
        key = _key_of(request.state)
        if key:
            # Another instance may have opened it (an agent rebuilt on a checkpointed thread).
            traj = self._own.get(key) or self.guard.find_trajectory(key)
            if traj is not None and not traj.ended:
                return traj
        return self._users(getattr(request.runtime, "config", None))

    def _open(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        if inside_guarded_call():
            return None
        stale = state.get(STATE_KEY)
        if stale:  # a run of this thread that failed before after_agent
            self._end(stale, state=None)
        config = _config()
        users = self._users(config)
        if users is not None:
            _instrumentation.mark_langsmith_run(users.id)
            return {STATE_KEY: None} if stale else None
        id = uuid.uuid4().hex
        traj = self.guard.trajectory(
            id,
            key=id,
            labels=self.labels,
            user_input=_human_texts(messages_of(state, self.messages_key)),
            conversation_id=thread_id(config) if config else None,
        )
        with _instrumentation.below(_instrumentation.run_span()):
            traj.start()  # in an instrumentation's trace, where one traces the run
        _instrumentation.mark_langsmith_run(id)  # LangSmith's trace joined by the report
        self._own[id] = traj
        tg.end_at_exit(traj)  # ended there at the latest, if no hook ends it
        # The conversation's earlier turns, in the history: their results bind as context.
        bind_history(self.guard, traj, messages_of(state, self.messages_key), self.calls.raw)
        return {STATE_KEY: id}

    def _close(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        key = state.get(STATE_KEY)
        if key:
            self._end(key, state)
            return {STATE_KEY: None}
        if inside_guarded_call():
            return None
        traj = self._users(_config())
        if traj is not None:
            with active(self.guard, traj):
                self.ledger.account_last_turn(traj, state)
        return None

    def _end(self, key: str, state: Mapping[str, Any] | None) -> None:
        traj = self._own.pop(key, None) or self.guard.find_trajectory(key)
        if traj is None or traj.ended:  # ended already: expired, evicted, or by the user
            return
        if state is not None:
            with active(self.guard, traj):
                self.ledger.account_last_turn(traj, state)
            traj.success = self._outcome(state)
        traj.end()
        self.ledger.forget(traj)

    def _outcome(self, state: Mapping[str, Any]) -> bool | None:
        if self.success is None:
            return None
        try:
            value = self.success(state)
        except Exception:  # the outcome stays unknown; the agent's answer is unaffected
            logger.exception("toolguard: the success callback raised; the outcome is unknown")
            return None
        return None if value is None else bool(value)


def _key_of(state: Any) -> str | None:
    """The key of the trajectory a middleware opened for this run, kept in its state."""
    key = state.get(STATE_KEY) if type(state) is dict else getattr(state, STATE_KEY, None)
    if key is None and isinstance(state, Mapping):
        key = state.get(STATE_KEY)
    return key if isinstance(key, str) and key else None


def _config() -> Mapping[str, Any] | None:
    try:
        return get_config()
    except RuntimeError:  # a hook called outside a graph run
        return None


def _human_texts(messages: Any) -> list[str]:
    # What the user typed is information the agent has (the `information` check).
    return [m.text for m in messages if isinstance(m, HumanMessage) and m.text]
