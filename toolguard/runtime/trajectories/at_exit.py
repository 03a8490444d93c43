"""Trajectories ended at interpreter exit when nothing ended them before, so each still
writes its summary (the outcome as far as known):

- every started trajectory still alive: one open in a daemon thread (the interpreter stops
  the thread without unwinding its ``with``), one started and never ended. Held weakly: a
  trajectory dropped without being ended is not kept alive for the exit's sake;
- a run an adapter owns that dies in a way no hook sees (a handler never awaited, a recursion
  limit, the process leaving mid-run), which nothing else holds: held strongly until it ends
  (``tg.end_at_exit``).
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .trajectory import Trajectory

logger = logging.getLogger("toolguard")

# Held strongly until the trajectory ends (Trajectory.end forgets it): a run dropped
# mid-way, which nothing else holds, is still ended.
_waiting: set[Trajectory] = set()
_open: weakref.WeakSet[Trajectory] = weakref.WeakSet()  # started, not ended (Trajectory.start)
_lock = threading.Lock()
_registered = False


def _register() -> None:
    """The exit hook, registered on first use (under _lock): after the user's tracer provider
    and its file export (atexit runs last-in first), so the summaries are written before
    they shut down."""
    global _registered
    if not _registered:
        atexit.register(end_waiting)
        _registered = True


def opened(traj: Trajectory) -> None:
    """``traj`` started: ended at exit if it is still alive and open then."""
    with _lock:
        _register()
        _open.add(traj)


def end_at_exit(traj: Trajectory) -> None:
    """End ``traj`` at interpreter exit unless it has ended by then (its summary written,
    outcome unknown). For the trajectories an adapter opens and owns."""
    with _lock:
        _register()
        if not traj.ended:
            _waiting.add(traj)
            traj._at_exit = True


def forget(traj: Trajectory) -> None:
    """``traj`` ended: nothing left to do for it at exit."""
    with _lock:
        _waiting.discard(traj)
        _open.discard(traj)


def end_waiting() -> None:
    """End every trajectory still waiting or open (at interpreter exit)."""
    with _lock:
        left = list(_waiting)
        left += [traj for traj in list(_open) if traj not in _waiting]
        _waiting.clear()
        _open.clear()
    for traj in left:
        try:
            traj.end()
        except Exception:  # at exit: never raise, the others still end
            logger.exception("toolguard: could not end trajectory %r at exit", traj.id)
