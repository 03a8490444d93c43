"""One model turn's parallel tool calls (:meth:`Guard.acall_batch`): every call checked
first, with its step in list order, then all of them run concurrently."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..trajectories.nesting import counted_in
from ..trajectories.trajectory import Trajectory
from .pipeline import Arguments, awaitable

if TYPE_CHECKING:
    from ..guard import Guard


async def acall_batch(
    guard: Guard,
    calls: Sequence[tuple[str, Arguments] | tuple[str, Arguments, str | None]],
    trajectory: Trajectory | None,
) -> list[Any]:
    """The calls' answers in list order (a rejection comes back as a value)."""
    traj = counted_in(trajectory)  # None when this batch runs inside a guarded call
    # In list order; a call id whose step the turn reserved (traj.reserve, a framework's
    # emission order) takes that one, as a single call does.
    steps = [
        traj._take_step(c[2] if len(c) > 2 else None) if traj is not None else None for c in calls
    ]
    given = trajectory if traj is None else traj  # nested: each call finds it so itself
    pendings = [
        guard._check(c[0], c[1], c[2] if len(c) > 2 else None, given, None, s)
        for c, s in zip(calls, steps, strict=True)
    ]
    try:
        results = [guard._run_checked(p) for p in pendings]
        # Like acall: a rejection comes back as a value; a BaseException propagates.
        return list(await asyncio.gather(*(awaitable(r) for r in results)))
    except BaseException:
        # Cancelled before some calls ran their first step: they end as cancelled now,
        # not whenever their never-started coroutines are garbage-collected.
        for pending in pendings:
            if not pending.done:
                pending.cancel()
        raise
