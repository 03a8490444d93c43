"""A trajectory whose record lives in a shared store: this process's replica of it.

The checks read a trajectory's bindings and what it has seen from local structures, as
they do for an in-memory trajectory; here those structures are a replica of the shared
record, kept up to date by the round trips a call makes anyway:

- begin (``_Call.__init__`` takes the step): the step (reserved for the call id, else the
  next), and every event other processes wrote since the replica's cursor, applied before
  the checks run;
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
trajectory id and its events are sent again with the next round trip that works; a
trajectory's end reads its posted finishes' answers first, and the process that claims
the summary waits for the others' pending steps, so T and FED count them.

What this process's own calls produce is applied to the replica at once and written to the
store with the call's finish; events carry their writer's token, so a replica never applies
its own twice. The summary is claimed in the store when the trajectory ends: the first
process to end it writes it, with T and FED from the shared record; the others write none.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, Tracer

from ... import _contract as contract
from ..._errors import UsageError
from ..verdict import NAME_LIMIT, Failure, shorten_text
from .bindings import Binding, Bindings
from .leaves import add_leaves
from .registry import TrajectoryRegistry
from .shared_events import (  # noqa: F401  (the value encoding, as tests/runtime imports it)
    _UNSHARABLE,
    Finishing,
    SharedBindings,
    decode,
    pending_flags,
)
from .shared_events import decode as _decode  # noqa: F401
from .shared_events import encode as _encode  # noqa: F401
from .store import (
    Held,
    MemoryStore,
    Posted,
    SharedRecord,
    SharedSummary,
    Sync,
    TrajectoryStore,
    TrajectoryStoreError,
)
from .trajectory import Trajectory

if TYPE_CHECKING:
    from ..tools.tool import Tool

logger = logging.getLogger("toolguard")

STORE_CHECK = "dependency.trajectory_store"  # the check a call fails when the store is down
_SCALARS = (str, int, float, bool)
Pending = tuple[tuple[int, str], ...]
# The steps other replicas had pending when this context's last call began, and where a
# wait for their finishes starts: (the trajectory, those steps, the mark).
_waiting: ContextVar[tuple[SharedTrajectory, Pending, str] | None] = ContextVar(
    "toolguard_store_waiting", default=None
)


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


class SharedTrajectory(Trajectory):
    """A :class:`Trajectory` kept in a shared store (module docstring). Made by the guard
    (``Guard(store=...).trajectory(...)``), never directly."""

    def __init__(self, id: str, *, record: SharedRecord, token: str, **options: Any) -> None:
        # Set before Trajectory.__init__, which observes the user input.
        self._store = record
        self._token = token  # this replica's mark on the events and steps it writes
        self._outbox: list[str] = []
        self._posted: list[Posted] = []  # finishes written whose answer is not read yet
        self._registered: set[int] = set()  # steps begun as pending: their finish clears them
        self._abandoned: set[int] = set()  # others' pending steps waited for in vain
        self._out_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._cursor = 0  # log entries [0, cursor) are applied
        # The largest step taken while the store did not answer (0: none since the last
        # round trip that worked): the store raises T to it, so no step is taken twice.
        self._floor = 0
        self._given: dict[str, int] = {}  # steps another process assigned (reserve(mapping))
        self._claimed = False  # the summary was claimed (by any process)
        self._warned: set[str] = set()
        super().__init__(id, **options)
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
        flags = pending_flags(tool, observes)
        events, floor = self._take_outbox(), self._floor
        try:
            step, sync = self._store.begin(self._cursor, floor, call_id, given, flags, events)
        except TrajectoryStoreError as exc:
            self._put_back(events)
            with self._lock:
                self._length += 1
                step = given if given is not None else self._length
                self._floor = self._length
            return step, self._unavailable(exc, fail_open, step)
        self._apply(sync, floor)
        if flags:
            self._registered.add(step)
        pending = self._others(sync.pending)
        if pending:
            _waiting.set((self, pending, sync.mark))
            if tool is not None and (tool.refs or tool.ref_paths):
                # a reference checked live here may be invalidated by a finish in flight
                self._wait_for(lambda: True, invalidating=True)
        elif _waiting.get() is not None:
            _waiting.set(None)
        if sync.claimed and "claimed" not in self._warned:
            self._warned.add("claimed")
            logger.warning(
                "toolguard: a call (step %s) of trajectory %r after its summary was written "
                "by the process that ended it: the summary does not count it",
                step,
                self._shown_id,
            )
        return step, None

    def _others(self, pending: Pending) -> Pending:
        if not pending or not self._abandoned:
            return pending
        return tuple(p for p in pending if p[0] not in self._abandoned)

    def _wait_for(self, ok: Callable[[], bool], invalidating: bool = False) -> bool:
        """Wait for the steps other replicas had pending when this context's call began
        (only those that may invalidate, with ``invalidating``) until ``ok()`` or none is
        left: blocking reads in the store, bounded by its timeout. The answer of ``ok()``."""
        waiting = _waiting.get()
        if waiting is None or waiting[0] is not self:
            return False
        _, pending, mark = waiting
        steps = {s for s, f in pending if not invalidating or "i" in f}
        if not steps:
            return ok()
        bound = self._store.wait_timeout
        deadline = time.monotonic() + bound
        while steps:
            left = deadline - time.monotonic()
            if left <= 0:
                self._abandoned.update(steps)
                logger.warning(
                    "toolguard: trajectory %r: steps %s of other processes did not finish "
                    "within %.3g s; checked without them",
                    self._shown_id,
                    sorted(steps),
                    bound,
                )
                break
            floor = self._floor
            try:
                sync = self._store.wait(self._cursor, floor, mark, left)
            except TrajectoryStoreError as exc:
                self._log_store(exc, "waiting for other processes' steps")
                break
            self._apply(sync, floor)
            mark = sync.mark or mark
            now = {s for s, _ in sync.pending}
            steps &= now
            pending = tuple(p for p in pending if p[0] in now)
            if not invalidating and ok():
                break
        _waiting.set((self, pending, mark) if pending else None)
        return ok()

    def _take_step(self, call_id: str | None) -> int:
        # Not reached from the call path (which asks _begin, and its failure, itself).
        return self._begin(call_id, False)[0]

    def next_step(self) -> int:
        return self.reserve([None])[0]  # type: ignore[list-item]

    def reserve(self, call_ids: Iterable[str] | Mapping[str, int]) -> list[int]:
        """As :meth:`Trajectory.reserve`, the steps taken in the shared record (one round
        trip); steps another process assigned (a mapping) are kept here for the calls that
        carry them."""
        if isinstance(call_ids, Mapping):
            given = dict(call_ids)
            for call_id, step in given.items():
                if not isinstance(call_id, str):
                    raise UsageError(f"reserve() takes call ids (strings), got {call_id!r}")
                if isinstance(step, bool) or not isinstance(step, int) or step < 1:
                    raise UsageError(f"reserve(): the step of {call_id!r} must be an int >= 1")
            with self._lock:
                self._given.update(given)
                self._length = max(self._length, *given.values()) if given else self._length
            return list(given.values())
        ids = list(call_ids)
        for call_id in ids:
            if call_id is not None and not isinstance(call_id, str):
                raise UsageError(f"reserve() takes call ids (strings), got {call_id!r}")
        events, floor = self._take_outbox(), self._floor
        try:
            steps, sync = self._store.reserve(self._cursor, floor, ids, events)
        except TrajectoryStoreError as exc:
            self._put_back(events)
            self._log_store(exc, "reserving steps")
            with self._lock:
                first = self._length + 1
                self._length += len(ids)
                self._floor = self._length
            return list(range(first, first + len(ids)))
        self._apply(sync, floor)
        return steps

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
        are pending is looked up again once they land (``_wait_for``)."""
        binding = self._bindings.lookup(kind, value)
        if (
            (binding is None or not binding.live)
            and _waiting.get() is not None
            and self._wait_for(lambda: _live(self._bindings.lookup(kind, value)))
        ):
            return self._bindings.lookup(kind, value)
        return binding

    def has_seen(self, value: Any) -> bool:
        if Trajectory.has_seen(self, value):
            return True
        if _waiting.get() is None:
            return False
        return self._wait_for(lambda: Trajectory.has_seen(self, value))

    def bind(self, kind: str, value: Any, *, source: str = "user", shown: bool = True) -> None:
        Trajectory.bind(self, kind, value, source=source, shown=shown)
        if self._started:  # made known to the other processes now, not at the next call
            self._push("binding a value")

    def _push(self, what: str) -> None:
        events, floor = self._take_outbox(), self._floor
        try:
            sync = self._store.sync(self._cursor, floor, events)
        except TrajectoryStoreError as exc:
            self._put_back(events)
            self._log_store(exc, what)
            return
        self._apply(sync, floor)

    def sync(self) -> None:
        """Bring the replica up to date now (one round trip) and send what it holds back."""
        self._push("syncing")

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> Trajectory:
        Trajectory.start(self)
        events, floor = self._take_outbox(), self._floor
        try:
            sync = self._store.join(self._cursor, floor, self.labels, self.conversation_id, events)
        except TrajectoryStoreError as exc:
            self._put_back(events)
            self._log_store(exc, "opening it")
        else:
            self._apply(sync, floor)
        return self

    def _write_summary(self, exc: BaseException | None) -> None:
        self._settle()  # what this replica's calls wrote has landed (or is back in the outbox)
        try:
            # As in memory, a trajectory never started writes no summary.
            claim = self.writes_summary and self._started
            summary = self._claim(claim)
        except TrajectoryStoreError as err:
            logger.error(
                "toolguard: trajectory %r: its summary could not be claimed in the trajectory "
                "store %s (%s): no summary written here (T so far %d, FED %d)",
                self._shown_id,
                self._store.store_name,
                err,
                self.length,
                self.first_error_depth,
            )
            return
        if summary is None:
            if claim:
                logger.info(
                    "toolguard: trajectory %r: its summary was written by another process",
                    self._shown_id,
                )
            return
        with self._lock:
            self._length = max(self._length, summary.length)
            self._first_error = summary.first_error
        if self.success is None:
            self.success = summary.success
        if self.conversation_id is None:
            self.conversation_id = summary.conversation_id
        self.labels = {**summary.labels, **self.labels}
        try:  # a root of its own, started when the trajectory was first seen by any process
            span = self._tracer.start_span(
                contract.SUMMARY_SPAN_NAME,
                context=otel_context.Context(),
                kind=SpanKind.INTERNAL,
                start_time=summary.created_ns,
            )
        except Exception:
            logger.exception("toolguard: could not start the summary span of %r", self.id)
            return
        self._end_summary(span, exc)

    def _claim(self, claim: bool) -> SharedSummary | None:
        """End the trajectory in the store and, with ``claim``, claim its summary once the
        steps other replicas have pending have landed (or the store's timeout passed)."""
        store = self._store
        hold = claim
        deadline = time.monotonic() + store.wait_timeout
        while True:
            events, floor = self._take_outbox(), self._floor
            try:
                answer = store.end(
                    floor, claim, self._token, self.success, self.labels, events, hold
                )
            except TrajectoryStoreError:
                self._put_back(events)
                raise
            if not isinstance(answer, Held):
                return answer
            left = deadline - time.monotonic()
            if left > 0:
                self._apply(store.wait(self._cursor, self._floor, answer.mark, left), self._floor)
                continue
            hold = False
            logger.warning(
                "toolguard: trajectory %r: steps %s of other processes had not finished "
                "when its summary was claimed",
                self._shown_id,
                [s for s, _ in answer.pending],
            )

    # -- the replica -----------------------------------------------------------------------
    def _out(self, event: str) -> None:
        with self._out_lock:
            self._outbox.append(event)

    def _take_outbox(self) -> list[str]:
        if not self._outbox:
            return []
        with self._out_lock:
            events, self._outbox = self._outbox, []
        return events

    def _put_back(self, events: list[str]) -> None:
        if events:
            with self._out_lock:
                self._outbox[:0] = events

    def _apply(self, sync: Sync, floor: int) -> None:
        """Apply the entries other processes wrote, in the store's order, once each; the
        store has the steps taken while it did not answer, up to ``floor``."""
        token = self._token
        with self._sync_lock:
            if floor and self._floor == floor:
                self._floor = 0
            skip = self._cursor - sync.start
            entries = sync.entries[skip:] if skip > 0 else sync.entries
            # past the entries this replica wrote in the same round trip (not sent back)
            end = sync.end if sync.end is not None else sync.start + len(sync.entries)
            self._cursor = max(self._cursor, end)
            for entry in entries:
                try:
                    kind, data = entry[0], json.loads(entry[1:])
                    if data[0] != token:
                        self._apply_one(kind, data)
                except Exception:  # a malformed entry (another version?) is skipped, loudly
                    logger.exception("toolguard: trajectory %r: an unreadable store entry", self.id)
            with self._lock:
                self._length = max(self._length, sync.length)
                if sync.first_error is not None:
                    self._first_error = sync.first_error
            self._claimed = self._claimed or sync.claimed
        if sync.dropped:
            self._warn_dropped()

    def _warn_dropped(self) -> None:
        if "dropped" not in self._warned:
            self._warned.add("dropped")
            logger.warning(
                "toolguard: trajectory %r: the trajectory store keeps no more of what it has "
                "seen (its bound is reached): other processes' information checks no longer "
                "see this process's newer results",
                self._shown_id,
            )

    def _apply_one(self, kind: str, data: list[Any]) -> None:
        base = Bindings
        if kind == "p":
            _, name, values, source, step, shown = data
            decoded = [decode(v) for v in values]
            if shown:
                base.produce_all(self._bindings, name, decoded, source, step)
            else:
                for value in decoded:
                    base.produce(self._bindings, name, value, source, step, False)
        elif kind == "i":
            _, name, value, by = data
            base.invalidate(self._bindings, name, decode(value), by)
        elif kind == "t":
            Trajectory.observe(self, data[1])
        elif kind == "l":
            self._seen.update(data[1])
        # "f": a first failure sent late; the store read it (its step and cause), nothing here

    def _unavailable(self, exc: TrajectoryStoreError, fail_open: bool, step: int) -> Failure | None:
        name = self._store.store_name
        if fail_open:
            logger.warning(
                "toolguard: trajectory %r step %s: the trajectory store %s did not answer "
                "(%s); failing open: checked against what this process last knew",
                self._shown_id,
                step,
                name,
                exc,
            )
            return None
        logger.error(
            "toolguard: trajectory %r step %s: the trajectory store %s did not answer (%s); "
            "failing closed: the call is blocked",
            self._shown_id,
            step,
            name,
            exc,
        )
        return Failure(
            contract.DEPENDENCY,
            STORE_CHECK,
            f"guard error: the trajectory store {name} did not answer ({exc}) (fail closed)",
            "This call could not be verified (the guard's trajectory store is unavailable), so "
            "it was not run. Try again in a moment.",
            guard_error=True,
            telemetry_message=f"guard error: the trajectory store {name} did not answer "
            "(fail closed)",
        )

    def _log_store(self, exc: TrajectoryStoreError, what: str) -> None:
        logger.error(
            "toolguard: trajectory %r: the trajectory store %s did not answer %s (%s); "
            "kept here and sent with the next round trip that works",
            self._shown_id,
            self._store.store_name,
            what,
            exc,
        )

    @property
    def _shown_id(self) -> str:
        return shorten_text(self.id, NAME_LIMIT)


def _live(binding: Binding | None) -> bool:
    return binding is not None and binding.live
