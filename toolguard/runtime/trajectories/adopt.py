"""Which trajectory an adapter's run counts in: the user's, the current one, or a new one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._errors import UsageError
from .current import current_trajectory
from .trajectory import Trajectory


def run_trajectory(given: Any, make: Callable[[], Trajectory]) -> tuple[Trajectory, bool]:
    """The trajectory an adapter's run counts in, and whether the adapter owns it (ends it).

    ``given`` (what the user passed the adapter: a ``tg.Trajectory`` or None) comes first:
    started here and owned, unless the user started it already (then the user ends it). Else
    the trajectory current where the run starts (``with guard.trajectory(...):`` around it),
    not owned. Else ``make()``, started here and owned. An ended ``given``, or one that is no
    trajectory, is a :class:`tg.UsageError`. An adapter that owns it and may not see its run
    end (a handler never awaited) passes it to :func:`tg.end_at_exit`."""
    if given is not None:
        if not isinstance(given, Trajectory):
            raise UsageError(f"trajectory must be a tg.Trajectory, got {type(given).__name__}")
        if given.ended:
            raise UsageError(f"trajectory {given.id!r} has already ended")
        try:
            given.start()
        except UsageError:  # started by the user, who ends it
            return given, False
        return given, True
    current = current_trajectory()
    if current is not None and not current.ended:
        return current, False
    made = make()
    made.start()
    return made, True
