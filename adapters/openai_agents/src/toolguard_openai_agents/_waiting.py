"""The calls of a run whose steps are reserved and that no guarded tool has checked yet.

``reserve_turn`` takes a turn's steps as soon as the model answers, and a call claims its
step when the guard checks it in the tool's body. A call the run gives up on first
(``result.cancel()``, a sibling's exception that stops the run, a stream left unread) would
keep its step, counted in T, with no verdict or span. So ``guarded_run`` (and ``run`` /
``run_sync``) opens a :class:`Waiting` for its block, and when the block ends each call still
waiting is checked and ends ``cancelled`` (``blocked`` when its checks say so).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass

import toolguard as tg

logger = logging.getLogger("toolguard")


@dataclass(frozen=True, slots=True)
class _Call:
    guard: tg.Guard
    name: str
    arguments: str  # the model's JSON text, as the tool's body would have checked it


class Waiting:
    """The reserved, unchecked calls of one run of ``traj``, in emission order."""

    def __init__(self, traj: tg.Trajectory) -> None:
        self.traj = traj
        self._calls: dict[str, _Call] = {}
        self._lock = threading.Lock()  # tool bodies may run in other threads (sync tools)

    def add(self, guard: tg.Guard, calls: Iterable[tuple[str, str, str]]) -> None:
        """(call id, tool name, arguments) of calls whose steps were just reserved."""
        with self._lock:
            for call_id, name, arguments in calls:
                self._calls.setdefault(call_id, _Call(guard, name, arguments))

    def claim(self, call_id: str) -> None:
        """The call reached its tool's guard: it ends there, not here."""
        with self._lock:
            self._calls.pop(call_id, None)

    def close(self) -> None:
        """End every call still waiting as cancelled; once (a second close finds none)."""
        with self._lock:
            calls, self._calls = self._calls, {}
        for call_id, call in calls.items():
            try:
                call.guard.cancel_unstarted(
                    call.name, call.arguments, call_id=call_id, trajectory=self.traj
                )
            except Exception:  # the run is over either way: never fail its block for this
                logger.exception("toolguard: could not close the unrun call %r", call_id)


# The open run of this context: set by guarded_run, copied into the SDK's tasks with the rest
# of the context, so the hooks and tool bodies of the run find the same object.
CURRENT: ContextVar[Waiting | None] = ContextVar("toolguard_openai_agents_waiting", default=None)


def claim(call_id: str | None) -> None:
    waiting = CURRENT.get()
    if waiting is not None and call_id is not None:
        waiting.claim(call_id)
