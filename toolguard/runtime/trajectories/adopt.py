"""Which trajectory an adapter's run counts in: the user's, the current one, or a new one;
and the ones it owns ended at interpreter exit if nothing ended them before."""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..._errors import UsageError
from .trajectory import Trajectory, current_trajectory

logger = logging.getLogger("toolguard")

# Trajectories an adapter owns: ended at interpreter exit if still open. Weak: a trajectory
# nothing else holds is gone anyway (its summary then never written, as without this).
_owned: weakref.WeakSet[Trajectory] = weakref.WeakSet()
_owned_lock = threading.Lock()
_registered = False


def run_trajectory(given: Any, make: Callable[[], Trajectory]) -> tuple[Trajectory, bool]:
    """The trajectory an adapter's run counts in, and whether the adapter owns it (ends it).

    ``given`` (what the user passed the adapter: a ``tg.Trajectory`` or None) comes first:
    started here and owned, unless the user started it already (then the user ends it). Else
    the trajectory current where the run starts (``with guard.trajectory(...):`` around it),
    not owned. Else ``make()``, started here and owned. An ended ``given``, or one that is no
    trajectory, is a :class:`tg.UsageError`. A trajectory the adapter owns and does not end
    (the process exits mid-run) is ended at interpreter exit, outcome unknown."""
    if given is not None:
        if not isinstance(given, Trajectory):
            raise UsageError(f"trajectory must be a tg.Trajectory, got {type(given).__name__}")
        if given.ended:
            raise UsageError(f"trajectory {given.id!r} has already ended")
        try:
            given.start()
        except UsageError:  # started by the user, who ends it
            return given, False
        return _owning(given), True
    current = current_trajectory()
    if current is not None and not current.ended:
        return current, False
    made = make()
    made.start()
    return _owning(made), True


def _owning(traj: Trajectory) -> Trajectory:
    """``traj`` is the adapter's to end: if a run dies in a way no hook sees (the process
    exits mid-run), it is ended at exit, its summary written with the outcome unknown."""
    global _registered
    with _owned_lock:
        if not _registered:
            # Registered on first use, after the user's tracer provider and its file export
            # (atexit runs last-in first): the summaries are written before they shut down.
            atexit.register(end_owned)
            _registered = True
        _owned.add(traj)
    return traj


def end_owned() -> None:
    """End every trajectory an adapter owns that is still open (at interpreter exit)."""
    with _owned_lock:
        left = list(_owned)
        _owned.clear()
    for traj in left:
        try:
            traj.end()
        except Exception:  # at exit: never raise, the others still end
            logger.exception("toolguard: could not end trajectory %r at exit", traj.id)
