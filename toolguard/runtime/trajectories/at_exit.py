"""Trajectories ended at interpreter exit when nothing ended them before: a run an adapter
owns that dies in a way no hook sees (a handler never awaited, a recursion limit, the process
leaving mid-run) still writes its summary, outcome unknown (``tg.end_at_exit``)."""

from __future__ import annotations

import atexit
import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .trajectory import Trajectory

logger = logging.getLogger("toolguard")

# Held strongly until the trajectory ends (Trajectory.end forgets it): a run dropped
# mid-way, which nothing else holds, is still ended.
_waiting: set[Trajectory] = set()
_lock = threading.Lock()
_registered = False


def end_at_exit(traj: Trajectory) -> None:
    """End ``traj`` at interpreter exit unless it has ended by then (its summary written,
    outcome unknown). For the trajectories an adapter opens and owns."""
    global _registered
    with _lock:
        if not _registered:
            # Registered on first use, after the user's tracer provider and its file export
            # (atexit runs last-in first): the summaries are written before they shut down.
            atexit.register(end_waiting)
            _registered = True
        if not traj.ended:
            _waiting.add(traj)
            traj._at_exit = True


def forget(traj: Trajectory) -> None:
    """``traj`` ended: nothing left to do for it at exit."""
    with _lock:
        _waiting.discard(traj)


def end_waiting() -> None:
    """End every trajectory still waiting (at interpreter exit)."""
    with _lock:
        left = list(_waiting)
        _waiting.clear()
    for traj in left:
        try:
            traj.end()
        except Exception:  # at exit: never raise, the others still end
            logger.exception("toolguard: could not end trajectory %r at exit", traj.id)
