"""Steps reserved by call id on a shared trajectory (``SharedTrajectory.reserve``): one model
turn's calls, in the order the model emitted them, reserved in the shared record.

The replica keeps the steps reserved by call id (``_turn``: call id -> step), its own and
those other replicas reserved (``r`` entries of the store's log), so a call whose own begin
is not answered goes on at its reserved step rather than a new one; the store, reconciling
that begin, lets the reservation count the call. A reservation the
store does not answer in time gives its steps out provisionally (the next ones this replica
knows of) and is reconciled like a begin given up on (``redis_given_up.py``): the next round
trip answered keeps the steps it took if it ran (late), else reserves its calls once, at
their provisional steps if no call took them yet, else at the next free ones, and refuses it
should it still arrive. A call begun after that takes the step the store reserved; one begun
before (its begin not answered either) keeps its provisional step, which its span says.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..._errors import UsageError
from .store import TrajectoryStoreError

if TYPE_CHECKING:
    from .shared import SharedTrajectory


def reserve(traj: SharedTrajectory, call_ids: Iterable[str] | Mapping[str, int]) -> list[int]:
    """As :meth:`Trajectory.reserve`, in the shared record (module docstring)."""
    if isinstance(call_ids, Mapping):
        given = dict(call_ids)
        for call_id, step in given.items():
            if not isinstance(call_id, str):
                raise UsageError(f"reserve() takes call ids (strings), got {call_id!r}")
            if isinstance(step, bool) or not isinstance(step, int) or step < 1:
                raise UsageError(f"reserve(): the step of {call_id!r} must be an int >= 1")
        with traj._lock:
            traj._given.update(given)
            traj._length = max(traj._length, *given.values()) if given else traj._length
        return list(given.values())
    ids = list(call_ids)
    for call_id in ids:
        if call_id is not None and not isinstance(call_id, str):
            raise UsageError(f"reserve() takes call ids (strings), got {call_id!r}")
    events, floor = traj._take_outbox(), traj._floor
    token = os.urandom(8).hex()  # the store runs this reservation once, or never once given up
    try:
        steps, sync = traj._store.reserve(traj._cursor, floor, ids, events, token)
    except TrajectoryStoreError as exc:
        traj._put_back(events)
        traj._log_store(exc, "reserving steps (given out provisionally)")
        return _provisional(traj, ids, token)
    with traj._lock:
        for call_id, step in zip(ids, steps, strict=True):
            if call_id is not None:
                traj._turn[call_id] = step
    traj._apply(sync, floor)
    traj._resend(sync)
    return steps


def _provisional(traj: SharedTrajectory, ids: Sequence[str | None], token: str) -> list[int]:
    """The steps a reservation the store did not answer gives out: the next ones this replica
    knows of (an id it reserved already keeps its step), known to the record before the floor
    counts them, so the reservation, had it run late, is not counted a second time."""
    steps, new = [], []
    with traj._lock:
        length = traj._length
        for call_id in ids:
            step = traj._turn.get(call_id) if call_id is not None else None
            if step is None:
                length += 1
                step = length
                new.append((call_id, step))
                if call_id is not None:
                    traj._turn[call_id] = step
            steps.append(step)
        traj._store.gave_up_reserving(token, new)
        traj._length = max(traj._length, length)
    return steps
