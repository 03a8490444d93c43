"""A shared trajectory's replica of its record: what it sends the store (the outbox) and how
it applies what the store sends back (:class:`Replica`, the base of ``SharedTrajectory``).

Each process applies its own calls' events at once and writes them with the next round
trip; it reads the other processes' events in the store's log order, from its cursor on.
That order is the order the events *landed*, which is not always the order their writer
made them: a write that failed is sent again with the next round trip that works, by which
time a later write of the same process may have landed (another lane, or the writes failed
together and were put back in turn), and a write whose answer was lost may have landed
once already. Bindings and invalidations are the events whose order matters, so each
carries its writer's sequence number, and a replica applies one only if it is newer than
what it already applied from that writer for that value (``_newer``): an invalidation
that landed before the production it undoes leaves the value stale, as its writer has it;
a production sent twice does not revive a value invalidated in between. Seen values,
finishes and failures do not depend on order (a set, a pending step cleared, the smallest
failing step).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from typing import Any

from ... import _contract as contract
from ..verdict import NAME_LIMIT, Failure, shorten_text
from .bindings import Bindings
from .shared_events import _UNSHARABLE, decode, encode
from .store import SharedRecord, Sync, TrajectoryStoreError
from .trajectory import Trajectory

logger = logging.getLogger("toolguard")

STORE_CHECK = "dependency.trajectory_store"  # the check a call fails when the store is down


class Replica(Trajectory):
    """The part of a ``SharedTrajectory`` that keeps its replica (module docstring)."""

    def __init__(self, id: str, *, record: SharedRecord, token: str, **options: Any) -> None:
        # Set before Trajectory.__init__, which observes the user input.
        self._store = record
        self._token = token  # this replica's mark on the events and steps it writes
        self._outbox: list[str] = []
        self._turn: dict[str, int] = {}  # steps reserved by call id (shared_reserve.py)
        self._out_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._seq = itertools.count(1)  # the order this replica made its binding events in
        # (writer, kind, value) -> (the writer's sequence number, who invalidated: None for
        # a production) of the newest binding event applied from that writer for that value
        self._order: dict[tuple[str, str, Any], tuple[int, str | None]] = {}
        self._cursor = 0  # log entries [0, cursor) are applied
        self._claimed = False  # the summary was claimed (by any process)
        self._warned: set[str] = set()
        super().__init__(id, **options)

    @property
    def _floor(self) -> int:
        """The largest step this replica knows, sent with every round trip: the store raises
        T to it, so a step taken while the store did not answer, or in a record the store
        has forgotten since (idle expiry, a restart), is not taken again. (The store's T is
        never below it otherwise: a no-op then.)"""
        return self._length

    # -- the outbox ----------------------------------------------------------------------
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

    # -- applying what the store sent ----------------------------------------------------
    def _apply(self, sync: Sync, floor: int) -> None:
        """Apply the entries other processes wrote, in the store's order, once each; the
        store has the steps this replica knew, up to ``floor``. A record the store forgot
        and started again (``sync.rebuilt``) is read from its start, and what this replica
        knows goes to the front of the outbox (:meth:`_known`)."""
        token = self._token
        with self._sync_lock:
            if sync.rebuilt:
                self._cursor = 0
                self._put_back(self._known())
                if "rebuilt" not in self._warned:
                    self._warned.add("rebuilt")
                    logger.warning(
                        "toolguard: trajectory %r: the trajectory store %s had forgotten its "
                        "record (idle longer than its idle timeout, or restarted empty): "
                        "started again from what this process knows (steps go on after %s; "
                        "its bindings and what it has seen are sent again)",
                        self._shown_id,
                        self._store.store_name,
                        floor,
                    )
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

    def _known(self) -> list[str]:
        """What this replica knows, as events (its bindings, live or made stale, what it has
        seen, its first failure): a record the store forgot is started again from them.
        Sent under this replica's token, with sequence numbers newer than any it sent."""
        token, events = self._token, []
        for kind, values in self._bindings.by_kind.items():
            for value, binding in list(values.items()):
                encoded = encode(value)
                if encoded is _UNSHARABLE:
                    continue
                source, step, shown = binding.produced_by, binding.step, binding.shown
                p = [token, kind, [encoded], source, step, shown, next(self._seq)]
                events.append(f"p{json.dumps(p)}")
                if not binding.live:
                    by = binding.invalidated_by or ""
                    events.append(f"i{json.dumps([token, kind, encoded, by, next(self._seq)])}")
        texts = list(self._texts)
        events.extend(f"t{json.dumps([token, text])}" for text in texts)
        leaves = sorted(self._seen.difference(texts))
        if leaves:
            events.append(f"l{json.dumps([token, leaves])}")
        if self._first_error is not None:
            events.append(f"f{json.dumps([token, *self._first_error])}")
        return events

    def _apply_one(self, kind: str, data: list[Any]) -> None:
        base = Bindings
        if kind == "p":
            writer, name, values, source, step, shown, seq = data
            fresh = []
            for value in map(decode, values):
                newer = self._newer(writer, name, value, seq, None)
                if newer is None:
                    fresh.append(value)
                elif newer[1] is not None and base.lookup(self._bindings, name, value) is None:
                    # its writer invalidated it after producing it: that landed first
                    base.produce(self._bindings, name, value, source, step, shown)
                    base.invalidate(self._bindings, name, value, newer[1])
            if shown:
                base.produce_all(self._bindings, name, fresh, source, step)
            else:
                for value in fresh:
                    base.produce(self._bindings, name, value, source, step, False)
        elif kind == "i":
            writer, name, value, by, seq = data
            value = decode(value)
            if self._newer(writer, name, value, seq, by) is None:
                base.invalidate(self._bindings, name, value, by)
        elif kind == "t":
            Trajectory.observe(self, data[1])
        elif kind == "l":
            self._seen.update(data[1])
        elif kind == "r":  # steps another replica reserved: a begin not answered takes them
            flat = data[1]
            for i in range(0, len(flat), 2):
                self._turn.setdefault(flat[i], int(flat[i + 1]))
        # "f": a first failure sent late; the store read it (its step and cause), nothing here

    def _newer(
        self, writer: str, kind: str, value: Any, seq: int, by: str | None
    ) -> tuple[int, str | None] | None:
        """The newer (or the same) binding event of ``writer`` for ``value`` already applied;
        None when this one (``seq``; ``by``: who invalidated, None for a production) is
        the newest, which it then becomes."""
        key = (writer, kind, value)
        try:
            last = self._order.get(key)
        except TypeError:  # an unhashable value is never bound
            return None
        if last is not None and last[0] >= seq:
            return last
        self._order[key] = (seq, by)
        return None

    # -- what the replica says -----------------------------------------------------------
    def _warn_dropped(self) -> None:
        if "dropped" not in self._warned:
            self._warned.add("dropped")
            logger.warning(
                "toolguard: trajectory %r: the trajectory store keeps no more of what it has "
                "seen (its bound is reached): other processes' information checks no longer "
                "see this process's newer results",
                self._shown_id,
            )

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

    def _undecided(self, fail_open: bool) -> Failure | None:
        """A call whose lookup failed after it gave up waiting for other processes' calls in
        flight: what it needs may still be on its way, so the store decides (fail closed: a
        guard error the model is told to retry; fail open: the check passes, logged)."""
        name = self._store.store_name
        if fail_open:
            logger.warning(
                "toolguard: trajectory %r: other processes' calls did not finish in time (store "
                "%s); failing open: a value not found is not held against the call",
                self._shown_id,
                name,
            )
            return None
        return Failure(
            contract.DEPENDENCY,
            STORE_CHECK,
            f"guard error: other processes' calls of this trajectory did not finish within "
            f"the trajectory store {name}'s timeout; a value they may bind was not found "
            "(fail closed)",
            "This call could not be verified yet (an earlier call is still being recorded), "
            "so it was not run. Try the same call again in a moment.",
            guard_error=True,
            telemetry_message=f"guard error: other processes' calls did not finish within "
            f"the trajectory store {name}'s timeout (fail closed)",
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
