"""A trajectory whose record lives in a shared store: this process's replica of it.

The checks read a trajectory's bindings and what it has seen from local structures, as
they do for an in-memory trajectory; here those structures are a replica of the shared
record, kept up to date by the round trips a call makes anyway:

- begin (``_Call.__init__`` takes the step): the step (reserved for the call id, else the
  next), and every event other processes wrote since the replica's cursor, applied before
  the checks run; a begin the store did not answer in time leaves the call a provisional
  step, and its token goes with the next round trips until one is answered, which
  reconciles it (``redis_scripts.py``: T counts the call once, its pending mark, if the
  begin ran late, is cleared);
- finish (the call's verdict is recorded: ``_verdicts.append``, whether ``_Call._finish``
  appends a valid call's verdict inline or ``Trajectory._record`` does): what the call
  produced, invalidated and saw, and its first failure if any, *posted*: written to the
  store before the call returns, its answer read later, so the call waits for one round
  trip, not two.

Posting the finish opens a window: another process may check its next call before this
finish lands. So a call that may write registers its step as pending when it begins, and
its finish clears it; a begin reports the steps other replicas have pending. A call whose
dependency or information check would fail while such steps are pending waits for them
(a blocking read in the store, bounded by the store's timeout) and is checked again; a
call with references waits the same way for a pending step that may invalidate. A
failing call that registered nothing sends its finish and waits for it (FED must be
right wherever the summary is written). A posted finish that fails is logged with the
trajectory id and its events are sent again with the next round trip that works (so
they may land after later ones: ``shared_replica.py`` applies bindings in their writer's
order); a trajectory's end reads its posted finishes' answers first, and the process that
claims the summary waits for the others' pending steps, so T and FED count them. A call
still open when the trajectory ends here closes without a finish (its outcome is not the
ended trajectory's, as in memory): the end clears its pending step, and what it binds and
sees is sent at once, so a process that goes on with the trajectory neither waits for it
nor misses its bindings.

What this process's own calls produce is applied to the replica at once and written to the
store with the call's finish; events carry their writer's token, so a replica never applies
its own twice. The summary is claimed in the store when the trajectory ends: the first
process to end it writes it, with T and FED from the shared record; the others write none.
The replica's outbox and how it applies the store's log: ``shared_replica.py``; waiting for
other processes' finishes: ``shared_wait.py``; the events: ``shared_events.py``.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Tracer

from ..verdict import Failure
from . import shared_reserve, shared_summary, shared_wait
from .bindings import Binding
from .leaves import add_leaves
from .registry import TrajectoryRegistry
from .shared_events import (  # noqa: F401  (the value encoding, as tests/runtime imports it)
    _UNSHARABLE,
    Finishing,
    SharedBindings,
    pending_flags,
)
from .shared_events import decode as _decode  # noqa: F401
from .shared_events import encode as _encode  # noqa: F401
from .shared_replica import STORE_CHECK, Replica  # noqa: F401  (tests/store import it here)
from .store import (
    MemoryStore,
    Posted,
    SharedRecord,
    Sync,
    TrajectoryStore,
    TrajectoryStoreError,
)
from .trajectory import Trajectory

if TYPE_CHECKING:
    from ..tools.tool import Tool

logger = logging.getLogger("toolguard")


def open_trajectory(
    store: TrajectoryStore,
    id: str | None,
    *,
    labels: Mapping[str, Any] | None,
    user_input: str | Iterable[str] | None,
    conversation_id: str | None,
    tracer: Tracer | None,
    tracer_provider: Any,
    registry: TrajectoryRegistry | None,
    key: str | None,
    summary: bool,
) -> Trajectory:
    """A trajectory of a guard whose record is in ``store`` (``Guard.trajectory``): a plain
    in-memory one unless the store keeps a shared record."""
    options: dict[str, Any] = {
        "labels": labels,
        "user_input": user_input,
        "conversation_id": conversation_id,
        "tracer": tracer,
        "tracer_provider": tracer_provider,
        "registry": registry,
        "key": key,
        "summary": summary,
    }
    if type(store) is MemoryStore:
        return Trajectory(id, **options)
    traj_id = id if id is not None else uuid.uuid4().hex
    token = uuid.uuid4().hex[:12]  # this replica's mark on the events and steps it writes
    record = store.record(traj_id, token)
    if record is None:
        return Trajectory(traj_id, **options)
    return SharedTrajectory(traj_id, record=record, token=token, **options)


class SharedTrajectory(Replica):
    """A :class:`Trajectory` kept in a shared store (module docstring). Made by the guard
    (``Guard(store=...).trajectory(...)``), never directly."""

    def __init__(self, id: str, *, record: SharedRecord, token: str, **options: Any) -> None:
        self._posted: list[Posted] = []  # finishes written whose answer is not read yet
        self._registered: set[int] = set()  # steps begun as pending: their finish clears them
        self._abandoned: set[int] = set()  # others' pending steps waited for in vain
        self._given: dict[str, int] = {}  # steps another process assigned (reserve(mapping))
        # The trajectory ended here (its summary claimed or not): a call still open then
        # closes without a finish (calls/call.py), so what it writes is sent at once.
        self._over = False
        super().__init__(id, record=record, token=token, **options)
        self._shared = True
        self._bindings = SharedBindings(self)
        self._verdicts = Finishing(self)

    # -- steps ---------------------------------------------------------------------------
    def _begin(
        self, call_id: str | None, fail_open: bool, tool: Tool | None = None, observes: bool = False
    ) -> tuple[int, Failure | None]:
        """A call's step and the replica brought up to date, in one round trip; when the
        store does not answer, a provisional step and (failing closed) the call's failure.
        ``tool`` and ``observes`` (the guard records what results show) say whether the
        call may write: then its step is pending until its finish lands."""
        given = self._given.pop(call_id, None) if call_id is not None and self._given else None
        reserved = self._turn.pop(call_id, None) if call_id is not None and self._turn else None
        flags = pending_flags(tool, observes)
        events, floor = self._take_outbox(), self._floor
        token = os.urandom(8).hex()  # the store runs this begin once, or never once given up
        try:
            step, sync = self._store.begin(
                self._cursor, floor, call_id, given, flags, events, token
            )
        except TrajectoryStoreError as exc:
            self._put_back(events)
            with self._lock:
                step = given if given is not None else reserved or self._length + 1
                # Known to the record before the floor counts the step: a round trip whose
                # floor includes it reconciles the begin first (redis_scripts.py), so the
                # begin, had it run late, is not counted a second time (nor a reserved
                # call, which its reservation counts).
                self._store.gave_up(token, step, given is not None, call_id)
                self._length = max(self._length, step)
            return step, self._unavailable(exc, fail_open, step)
        self._apply(sync, floor)
        if call_id is not None and self._turn:  # its reservation, if it came in this answer
            self._turn.pop(call_id, None)
        self._resend(sync)
        if flags:
            self._registered.add(step)
        pending = shared_wait.others(self, sync.pending)
        shared_wait.note(self, pending, sync.mark)
        if pending and tool is not None and (tool.refs or tool.ref_paths):
            # a reference checked live here may be invalidated by a finish in flight
            shared_wait.wait_for(self, lambda: True, invalidating=True)
        if sync.claimed and "claimed" not in self._warned:
            self._warned.add("claimed")
            logger.warning(
                "toolguard: a call (step %s) of trajectory %r after its summary was written "
                "by the process that ended it: the summary does not count it",
                step,
                self._shown_id,
            )
        return step, None

    def _take_step(self, call_id: str | None) -> int:
        # Not reached from the call path (which asks _begin, and its failure, itself).
        return self._begin(call_id, False)[0]

    def next_step(self) -> int:
        return self.reserve([None])[0]  # type: ignore[list-item]

    def reserve(self, call_ids: Iterable[str] | Mapping[str, int]) -> list[int]:
        """As :meth:`Trajectory.reserve`, the steps taken in the shared record (one round
        trip; when the store does not answer, provisional ones, reconciled later:
        ``shared_reserve.py``); steps another process assigned (a mapping) are kept here
        for the calls that carry them."""
        return shared_reserve.reserve(self, call_ids)

    # -- finishing a call ----------------------------------------------------------------
    def _finish_call(self, step: int, failures: list[Failure]) -> None:
        cause = (failures[0].cause or "") if failures else None
        registered = step in self._registered
        if registered:
            self._registered.discard(step)
        elif cause is None:
            if not self._outbox:
                return  # a valid call that bound and saw nothing: nothing to tell the store
        else:
            # No pending step tells the others to wait for this failure: sent and answered
            # before the call returns (FED must be right wherever the summary is written).
            self._outbox_failure(step, cause)
            self._push(f"recording step {step}")
            return
        if cause is not None:
            self._outbox_failure(step, cause)
        if registered:
            self._out(f"d{step}")
        events, floor = self._take_outbox(), self._floor
        if not events:
            return

        def done(dropped: int, error: TrajectoryStoreError | None) -> None:
            if error is not None:
                self._put_back(events)
                self._log_store(error, f"recording step {step}")
            elif dropped:
                self._warn_dropped()

        posted = self._store.post(floor, events, done)
        with self._out_lock:
            self._posted = [p for p in self._posted if not p.done]
            if not posted.done:
                self._posted.append(posted)

    def _settle(self) -> None:
        """Read the answers of this replica's posted finishes (their errors put their events
        back in the outbox)."""
        with self._out_lock:
            posted, self._posted = self._posted, []
        for p in posted:
            if not p.done:
                try:
                    self._store.settle(p)
                except Exception:  # never raised into the caller; the answer is logged
                    logger.exception("toolguard: trajectory %r: reading the store", self.id)

    def _outbox_failure(self, step: int, cause: str) -> None:
        """A first failure the store did not get: sent with the next round trip that works."""
        self._out(f"f{json.dumps([self._token, step, cause])}")

    # -- what the calls bind and see -----------------------------------------------------
    def observe(self, value: Any) -> None:
        if isinstance(value, str):
            Trajectory.observe(self, value)
            self._out(f"t{json.dumps([self._token, value])}")
            return
        leaves: list[str] = []
        add_leaves(value, leaves.append)
        if leaves:
            self._seen.update(leaves)
            self._out(f"l{json.dumps([self._token, leaves])}")

    def lookup(self, kind: str, value: Any) -> Binding | None:
        """As :meth:`Trajectory.lookup`; a value not live here while other processes' steps
        are pending is looked up again once they land (``shared_wait.wait_for``)."""
        binding = self._bindings.find(kind, value)
        if (
            (binding is None or not binding.live)
            and shared_wait.waiting()
            and shared_wait.wait_for(self, lambda: _live(self._bindings.find(kind, value)))
        ):
            return self._bindings.find(kind, value)
        return binding

    def unsettled(self, fail_open: bool) -> Failure | bool | None:
        """As :meth:`Trajectory.unsettled`: after this call gave up waiting for other
        processes' calls in flight, the store's failure (or None, failing open)."""
        if not shared_wait.in_vain():
            return False
        return self._undecided(fail_open)

    def has_seen(self, value: Any) -> bool:
        if Trajectory.has_seen(self, value):
            return True
        if not shared_wait.waiting():
            return False
        return shared_wait.wait_for(self, lambda: Trajectory.has_seen(self, value))

    def bind(self, kind: str, value: Any, *, source: str = "user", shown: bool = True) -> None:
        Trajectory.bind(self, kind, value, source=source, shown=shown)
        if self._started and not self._over:  # known to the others now, not at the next call
            self._push("binding a value")

    def _out(self, event: str) -> None:
        Replica._out(self, event)
        if self._over:  # a call closed after the trajectory ended: no finish will send it
            self._push("recording a call that closed after the trajectory ended")

    def _push(self, what: str) -> None:
        events, floor = self._take_outbox(), self._floor
        try:
            sync = self._store.sync(self._cursor, floor, events)
        except TrajectoryStoreError as exc:
            self._put_back(events)
            self._log_store(exc, what)
            return
        self._apply(sync, floor)
        self._resend(sync)

    def _resend(self, sync: Sync) -> None:
        """After a round trip that found the record forgotten and started again: what this
        replica knows (``_apply`` put it in the outbox) is sent at once, with its labels and
        conversation id, so another process's next call finds it (one more round trip,
        only then)."""
        if sync.rebuilt:
            self._join_record("starting its forgotten record again")

    def _join_record(self, doing: str) -> Sync | None:
        """Join the shared record with what the outbox holds (one round trip) and apply its
        answer; None when the store did not answer (the events go back to the outbox)."""
        events, floor = self._take_outbox(), self._floor
        try:
            sync = self._store.join(self._cursor, floor, self.labels, self.conversation_id, events)
        except TrajectoryStoreError as exc:
            self._put_back(events)
            self._log_store(exc, doing)
            return None
        self._apply(sync, floor)
        return sync

    def sync(self) -> None:
        """Bring the replica up to date now (one round trip) and send what it holds back."""
        self._push("syncing")

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> Trajectory:
        Trajectory.start(self)
        sync = self._join_record("opening it")
        if sync is not None:
            self._resend(sync)
        return self

    def _write_summary(self, exc: BaseException | None) -> None:
        self._settle()  # what this replica's calls wrote has landed (or is back in the outbox)
        # This replica's calls still open will close without a finish (their outcome is
        # not the ended trajectory's, as in memory): nobody is to wait for their steps.
        for step in list(self._registered):
            self._out(f"d{step}")
        self._registered.clear()
        answered = False
        try:
            answered = shared_summary.write(self, exc)
        finally:
            self._over = True
        if answered and self._outbox:  # a call closed while the summary was claimed
            self._push("recording a call that closed after the trajectory ended")


def _live(binding: Binding | None) -> bool:
    return binding is not None and binding.live
