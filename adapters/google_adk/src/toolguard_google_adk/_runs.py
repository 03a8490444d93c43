"""One invocation in progress (:class:`Run`): its trajectory, the calls its model turns
emitted and those admitted and still running, and how its end gives each its verdict."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

import toolguard as tg
from google.genai import types

from . import _calls

logger = logging.getLogger("toolguard")

# The invocation whose AgentTool call is running here: the sub-agent's runner (ADK hands it
# this plugin, with a session and invocation id of its own) counts in that invocation's
# trajectory. Set while the call runs, in the context ADK runs the tool in.
CALLER: ContextVar[str | None] = ContextVar("toolguard_adk_caller", default=None)


@dataclass(slots=True)
class Run:
    """One invocation in progress: its trajectory, whether the plugin ends it, and the calls
    admitted and still running, by call id."""

    traj: tg.Trajectory
    owned: bool
    pending: dict[str, tg.PendingCall] = field(default_factory=dict)
    # The calls whose steps a model turn reserved and that no tool callback has reached yet,
    # by call id: (tool name, arguments), to give each its verdict if the run ends first.
    unclaimed: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    # The AgentTool calls running, by call id: how to undo their mark on the context.
    callers: dict[str, Token[str | None]] = field(default_factory=dict)
    # A sub-agent's run (an AgentTool call's): the run of the call, whose trajectory it is.
    caller: Run | None = None

    def inside(self, run: Run) -> bool:
        """Whether this is the run of a sub-agent called, at any depth, from ``run``."""
        outer = self.caller
        while outer is not None:
            if outer is run:
                return True
            outer = outer.caller
        return False

    def reserve(self, calls: Sequence[types.FunctionCall]) -> None:
        """Reserve the steps of a model turn's calls, in emission order: a lone call's too,
        which counts in T even if the run ends before it reaches a tool callback."""
        # ADK's own calls (a confirmation or credentials it asks the client for, in an event
        # of its own) are answered by the client, never by a tool: no step.
        ids = [c.id for c in calls if c.id and c.name not in _calls.CLIENT_CALLS]
        if not ids:
            return
        self.traj.reserve(ids)
        for c in calls:
            if c.id in ids:
                self.unclaimed.setdefault(c.id, (c.name or "", dict(c.args or {})))

    def take(self, call_id: str) -> tg.PendingCall | None:
        """The admitted call of ``call_id``, now answered: no longer running."""
        # Claimed here too: a call another plugin answered before this one's check never
        # reached before_tool_callback, yet ADK answered it; it is not cancelled, and keeps
        # its reserved step without a verdict (the README's limit).
        self.unclaimed.pop(call_id, None)
        token = self.callers.pop(call_id, None)
        if token is not None:
            unmark(token)
        return self.pending.pop(call_id, None)

    def settle(self, guard: tg.Guard) -> None:
        """Calls still open when the invocation ends never got an answer: cancelled."""
        self.close_unclaimed(guard)
        for pending in list(self.pending.values()):
            if not pending.done:
                pending.cancel()
        self.pending.clear()
        for token in self.callers.values():
            unmark(token)
        self.callers.clear()

    def close_unclaimed(self, guard: tg.Guard) -> None:
        """End as cancelled the calls whose steps were reserved but that never reached a tool
        callback (the app stopped reading the events at the model's turn, the task was
        cancelled): each counts in T, so each gets its verdict and span. Checked first, as
        the core's turn helpers do, so a call the guard would have blocked is recorded
        blocked."""
        calls = list(self.unclaimed.items())
        self.unclaimed.clear()
        if self.traj.ended:
            return  # a trajectory of the caller's, ended before the run was: its summary is out
        for call_id, (name, args) in calls:
            try:
                guard.cancel_unstarted(name, args, call_id=call_id, trajectory=self.traj)
            except Exception:  # a guard failure never fails the run or the runner's close
                logger.warning("toolguard: could not close the call to %r", name, exc_info=True)


def unmark(token: Token[str | None]) -> None:
    try:
        CALLER.reset(token)
    except ValueError:  # closed in another context than it opened in
        CALLER.set(None)
