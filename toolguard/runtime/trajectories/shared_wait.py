"""Waiting for other processes' finishes in flight (``shared.py``'s module docstring says why):
the steps other replicas had pending when this context's call began, and the blocking reads
in the store that wait for them, bounded by the store's timeout."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

from .store import TrajectoryStoreError

if TYPE_CHECKING:
    from .shared import SharedTrajectory

logger = logging.getLogger("toolguard")

Pending = tuple[tuple[int, str], ...]
# The steps other replicas had pending when this context's last call began, and where a
# wait for their finishes starts: (the trajectory, those steps, the mark).
_waiting: ContextVar[tuple[SharedTrajectory, Pending, str] | None] = ContextVar(
    "toolguard_store_waiting", default=None
)


# Whether this context's call waited for other replicas' steps in vain (they did not finish
# within the store's timeout, or the store did not answer the wait): a value it then does not
# find may still be on its way, so not finding it is the store's failure, not the agent's.
_in_vain: ContextVar[bool] = ContextVar("toolguard_store_waited_in_vain", default=False)


def note(traj: SharedTrajectory, pending: Pending, mark: str) -> None:
    """What a call's begin heard: other replicas' ``pending`` steps (none: nothing to wait
    for in this context)."""
    if _in_vain.get():
        _in_vain.set(False)
    if pending:
        _waiting.set((traj, pending, mark))
    elif _waiting.get() is not None:
        _waiting.set(None)


def waiting() -> bool:
    """Whether this context's call began while other replicas' steps were pending."""
    return _waiting.get() is not None


def others(traj: SharedTrajectory, pending: Pending) -> Pending:
    """``pending`` without the steps this replica already waited for in vain."""
    if not pending or not traj._abandoned:
        return pending
    return tuple(p for p in pending if p[0] not in traj._abandoned)


def in_vain() -> bool:
    """Whether this context's call gave up waiting for other replicas' steps."""
    return _in_vain.get()


def wait_for(traj: SharedTrajectory, ok: Callable[[], bool], invalidating: bool = False) -> bool:
    """Wait for the steps other replicas had pending when this context's call began (only
    those that may invalidate, with ``invalidating``) until ``ok()`` or none is left:
    blocking reads in the store, bounded by its timeout. The answer of ``ok()``."""
    found = _waiting.get()
    if found is None or found[0] is not traj:
        return False
    _, pending, mark = found
    steps = {s for s, f in pending if not invalidating or "i" in f}
    if not steps:
        return ok()
    bound = traj._store.wait_timeout
    deadline = time.monotonic() + bound
    while steps:
        left = deadline - time.monotonic()
        if left <= 0:
            traj._abandoned.update(steps)
            _in_vain.set(True)
            logger.warning(
                "toolguard: trajectory %r: steps %s of other processes did not finish "
                "within %.3g s; checked without them",
                traj._shown_id,
                sorted(steps),
                bound,
            )
            break
        floor = traj._floor
        try:
            sync = traj._store.wait(traj._cursor, floor, mark, left)
        except TrajectoryStoreError as exc:
            traj._log_store(exc, "waiting for other processes' steps")
            _in_vain.set(True)
            break
        traj._apply(sync, floor)
        mark = sync.mark or mark
        now = {s for s, _ in sync.pending}
        steps &= now
        pending = tuple(p for p in pending if p[0] in now)
        if not invalidating and ok():
            break
    _waiting.set((traj, pending, mark) if pending else None)
    return ok()
