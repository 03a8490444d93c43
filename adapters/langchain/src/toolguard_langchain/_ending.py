"""Ending the trajectories of runs that fail, where ``after_agent`` never comes.

An exception that leaves the middleware's model or tool wrapper ends the run: the middleware
is the outermost one (its docs ask for that), so nothing above it can retry. The trajectory
then ends with the error on its summary and the outcome unknown, once the failed call's
siblings of the same turn (still running in the tool node's threads) are out. A failure no
hook sees (the graph's recursion limit, another middleware's hook raising) leaves it open
until the thread's next run, the guard's idle timeout, or interpreter exit, where every
trajectory a middleware opened and nobody ended is ended (``tg.end_at_exit``).
"""

from __future__ import annotations

import logging
import threading

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
