"""Ending the trajectories of runs that fail, where ``after_agent`` never comes.

An exception that leaves the middleware's model or tool wrapper ends the run: the middleware
is the outermost one (its docs ask for that), so nothing above it can retry. The trajectory
then ends with the error on its summary and the outcome unknown, once the failed call's
siblings of the same turn (still running in the tool node's threads) are out. A failure no
hook sees (the graph's recursion limit, another middleware's hook raising) leaves it open
until the thread's next run, the guard's idle timeout, or interpreter exit, where every
trajectory a middleware opened and nobody ended is ended.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref

import toolguard as tg

logger = logging.getLogger("toolguard")


class InFlight:
    """Per trajectory, the calls running now, and the first exception that failed the run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: dict[tg.Trajectory, int] = {}
        self._failed: dict[tg.Trajectory, BaseException] = {}

    def enter(self, traj: tg.Trajectory) -> None:
        with self._lock:
            self._count[traj] = self._count.get(traj, 0) + 1

    def leave(self, traj: tg.Trajectory, exc: BaseException | None) -> BaseException | None:
        """One call out (``exc``: it failed the run). Returns the run's exception when the
        trajectory should end now: the run failed and this was its last call running."""
        with self._lock:
            if exc is not None:
                self._failed.setdefault(traj, exc)
            left = self._count.get(traj, 1) - 1
            if left > 0:
                self._count[traj] = left
                return None
            self._count.pop(traj, None)
            return self._failed.pop(traj, None)


# Trajectories a middleware opened and has not ended: ended at interpreter exit. A weak set:
# the guard's registry keeps an open one alive, and a trajectory nothing holds is gone anyway.
_open: weakref.WeakSet[tg.Trajectory] = weakref.WeakSet()
_open_lock = threading.Lock()
_registered = False


def opened(traj: tg.Trajectory) -> None:
    global _registered
    with _open_lock:
        if not _registered:
            # Registered on first use, so after the user's tracer provider (and after
            # tg.setup_file_export): atexit runs last-in first, and the summaries are written
            # before the providers shut down.
            atexit.register(end_all)
            _registered = True
        _open.add(traj)


def closed(traj: tg.Trajectory) -> None:
    with _open_lock:
        _open.discard(traj)


def end_all() -> None:
    """End every trajectory still open (at interpreter exit): its summary, outcome unknown."""
    with _open_lock:
        left = list(_open)
        _open.clear()
    for traj in left:
        try:
            traj.end()
        except Exception:  # at exit: never raise, the others still end
            logger.exception("toolguard: could not end trajectory %r at exit", traj.id)
