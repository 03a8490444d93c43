"""The episode boundary: one trajectory per ``Runner.run`` / ``Runner.run_sync``.

The trajectory is made current around the run, in the caller's context. The SDK creates its
tool tasks (and ``run_sync`` its whole run) from there, and a task starts with a copy of its
creator's context, so every tool call and hook of the run finds the trajectory without any
registry. ``Runner.run_streamed`` works the same way as long as the stream is consumed
inside the block.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from contextvars import Token
from types import TracebackType
from typing import Any

import toolguard as tg

from ._history import bind_history, state_items
from ._sdk import Agent, FunctionTool, Runner, RunResult, RunState
from ._tools import guarded_by
from ._waiting import CURRENT, Emitted, Waiting

logger = logging.getLogger("toolguard")


# Lower case: it reads like a function call, `with guarded_run(guard) as traj:`.
class guarded_run:
    """``with`` / ``async with``: a trajectory open for the runs inside the block.

    Opens ``guard.trajectory(id, labels=..., user_input=..., key=...)`` and ends it (its
    summary span goes to the guard's provider) when the block ends, also by an exception.
    A call of the block's runs whose step was reserved and that never reached its tool (the
    run cancelled or failed first, a tool input guardrail or a human refused it) ends
    ``cancelled``, at the run's next model call or as the block ends; a call the run paused
    on for a human's approval keeps its step for the run that resumes it in the given
    ``trajectory=``; in a trajectory opened here, which ends with the block, it ends
    ``cancelled`` too (``blocked`` where its checks refuse it). Yields the
    :class:`toolguard.Trajectory`: set ``traj.success`` inside the block. With
    ``trajectory=`` the given trajectory is made current instead, and its owner ends it.
    """

    def __init__(
        self,
        guard: tg.Guard,
        id: str | None = None,
        *,
        labels: Mapping[str, Any] | None = None,
        user_input: str | Iterable[str] | None = None,
        key: str | None = None,
        conversation_id: str | None = None,
        trajectory: tg.Trajectory | None = None,
    ) -> None:
        options = (id, labels, user_input, key, conversation_id)
        if trajectory is not None and any(o is not None for o in options):
            raise ValueError("pass either trajectory= or the options of a new trajectory")
        self._guard = guard
        self._options = options
        self._given = trajectory
        self._active: AbstractContextManager[tg.Trajectory] | None = None
        self._waiting: tuple[Waiting, Token[Waiting | None]] | None = None

    def __enter__(self) -> tg.Trajectory:
        if self._active is not None:
            raise RuntimeError("guarded_run is not reentrant: open one per run")
        if self._given is not None:
            self._active = self._given.activate()
        else:
            id, labels, user_input, key, conversation_id = self._options
            self._active = self._guard.trajectory(
                id,
                labels=labels,
                user_input=user_input,
                key=key,
                conversation_id=conversation_id,
            )
        traj = self._active.__enter__()
        waiting = Waiting(traj)
        self._waiting = (waiting, CURRENT.set(waiting))
        return traj

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        active, self._active = self._active, None
        waiting, self._waiting = self._waiting, None
        try:
            if waiting is not None:
                # Before the trajectory ends: the cancelled calls belong in its summary.
                # A trajectory opened here ends now: nothing can resume its paused calls.
                waiting[0].close(raised=exc_type is not None, keep_paused=self._given is not None)
                CURRENT.reset(waiting[1])
        finally:
            if active is not None:
                active.__exit__(exc_type, exc, tb)

    async def __aenter__(self) -> tg.Trajectory:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


Success = Callable[[RunResult], bool | None]


async def run(
    guard: tg.Guard,
    agent: Agent[Any],
    input: Any,
    *,
    trajectory_id: str | None = None,
    labels: Mapping[str, Any] | None = None,
    trajectory: tg.Trajectory | None = None,
    success: Success | None = None,
    **runner_options: Any,
) -> RunResult:
    """``await Runner.run(agent, input, **runner_options)`` as one trajectory.

    ``agent`` should come from :func:`guard_agent`. ``success(result)`` sets the outcome Y;
    a run that raises ends the trajectory with Y unknown. A text ``input`` is what the agent
    has seen (the information check). A ``RunState`` (resuming after an approval): what the
    paused run showed is bound before the approved calls run.
    """
    with _episode(guard, input, trajectory_id, labels, trajectory, runner_options) as traj:
        _resume(guard, traj, input)
        result = await Runner.run(agent, input, **runner_options)
        _paused_on(result)
        if success is not None:
            traj.success = success(result)
    return result


def run_sync(
    guard: tg.Guard,
    agent: Agent[Any],
    input: Any,
    *,
    trajectory_id: str | None = None,
    labels: Mapping[str, Any] | None = None,
    trajectory: tg.Trajectory | None = None,
    success: Success | None = None,
    **runner_options: Any,
) -> RunResult:
    """:func:`run` for ``Runner.run_sync``."""
    with _episode(guard, input, trajectory_id, labels, trajectory, runner_options) as traj:
        _resume(guard, traj, input)
        result = Runner.run_sync(agent, input, **runner_options)
        _paused_on(result)
        if success is not None:
            traj.success = success(result)
    return result


def _resume(guard: tg.Guard, traj: tg.Trajectory, input: Any) -> None:
    # A run resumed after an approval runs the approved calls before any model call, where
    # the earlier turns are otherwise bound: the new trajectory learns them from the state.
    if isinstance(input, RunState):
        bind_history(guard, traj, state_items(input))
        # The paused calls are this run's to end: an approved one is checked as it runs, a
        # rejected one never reaches its tool and ends here, once.
        waiting = CURRENT.get()
        if waiting is not None and waiting.traj is traj:
            waiting.add(guard, _paused_calls(guard, input))


def _paused_calls(guard: tg.Guard, state: RunState[Any, Any]) -> list[Emitted]:
    try:
        items = state.get_interruptions()
    except Exception:  # the SDK's own resume reports what is wrong with the state
        logger.exception("toolguard: could not read the paused calls of the run state")
        return []
    calls = []
    for item in items:
        call_id, name, arguments = item.call_id, item.name, item.arguments
        if not (isinstance(call_id, str) and isinstance(name, str)):
            continue
        tools = getattr(item.agent, "tools", [])
        if any(
            isinstance(t, FunctionTool) and t.name == name and guarded_by(t) is guard for t in tools
        ):
            calls.append(Emitted(call_id, name, arguments or "", approval=True, held=True))
    return calls


def _paused_on(result: RunResult) -> None:
    # The result says which calls the run paused on: exactly those keep their steps.
    waiting = CURRENT.get()
    if waiting is not None:
        interruptions = getattr(result, "interruptions", None) or []
        waiting.interrupted({i.call_id for i in interruptions if isinstance(i.call_id, str)})


def _episode(
    guard: tg.Guard,
    input: Any,
    trajectory_id: str | None,
    labels: Mapping[str, Any] | None,
    trajectory: tg.Trajectory | None,
    runner_options: Mapping[str, Any],
) -> guarded_run:
    if trajectory is not None:
        if trajectory_id is not None or labels is not None:
            raise ValueError("pass either trajectory= or trajectory_id=/labels=")
        return guarded_run(guard, trajectory=trajectory)
    user_input = input if isinstance(input, str) else None
    # A Session is the conversation: its id on every run's summary (gen_ai.conversation.id).
    session_id = getattr(runner_options.get("session"), "session_id", None)
    return guarded_run(
        guard,
        trajectory_id,
        labels=labels,
        user_input=user_input,
        conversation_id=session_id if isinstance(session_id, str) else None,
    )
