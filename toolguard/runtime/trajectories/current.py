"""Which trajectory is current in this context, and how many are open in the process.

The current trajectory lives in a ContextVar, so trajectories in concurrent threads and
asyncio tasks never see each other's steps or bindings; the open count is what a call made
outside any trajectory checks to warn that it lost its context (calls/start.py,
nesting.warn_outside).
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .trajectory import Trajectory

current_var: ContextVar[Trajectory | None] = ContextVar("toolguard_trajectory", default=None)


def current_trajectory() -> Trajectory | None:
    """The trajectory open in this context, or None."""
    return current_var.get()


# A one-item list, not an int: calls/start.py imports it and reads the count without a call
# (an imported int would be a copy).
open_count = [0]
_open_lock = threading.Lock()


def count_open(delta: int) -> None:
    with _open_lock:
        open_count[0] += delta


def open_trajectories() -> int:
    """How many trajectories are started and not ended in this process (in any context)."""
    return open_count[0]
