"""Where a trajectory's record lives: the :class:`TrajectoryStore` seam.

The record of a trajectory (its step counter and reserved steps, what its calls bound and
invalidated, what it has seen, its labels, its first failure and its end) lives in one
process's memory by default (:class:`MemoryStore`: today's behaviour, no dependency, no cost
on a call). A deployment whose trajectories cross processes (an MCP proxy replicated behind
a load balancer, one proxy per server in one episode, a multi-worker agent service) keeps it
in a shared store instead (``redis_store.py``): each process then holds a replica of the
record (``shared.py``) brought up to date in the round trip that takes a call's step, and
writes what its calls produced in the one that finishes them.

A shared store implements :class:`SharedRecord` for one trajectory id; every method is one
round trip, atomic in the store, and answers with a :class:`Sync`: what other processes
wrote since the replica's cursor. A store that cannot answer in time raises
:class:`TrajectoryStoreError`; the guard's ``on_guard_error`` decides what that means for the
call (docs/deployment.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..._errors import ToolGuardError

MEMORY = "memory"


class TrajectoryStoreError(ToolGuardError):
    """The shared trajectory store did not answer (unreachable, too slow, refused)."""


@dataclass(slots=True, frozen=True)
class Sync:
    """What a round trip brought back: the record's log entries from ``start`` on (each an
    event another process or this one wrote), the record's T, its first failure and whether
    its summary was claimed; ``dropped``: seen values the store refused (over its bound);
    ``end``: the log's length after the round trip (entries this replica wrote in it are
    not sent back); ``pending``: the steps other replicas took whose finish has not landed
    (step, flags: ``w`` may write, ``i`` may invalidate), and ``mark``, where a wait for
    the next finish starts; ``rebuilt``: the store had forgotten the record the replica
    knew (its idle expiry, a server restarted empty) and started it again: the entries are
    the new record's from its start, and the replica sends what it knows again."""

    start: int
    entries: Sequence[str]
    length: int
    first_error: tuple[int, str] | None
    claimed: bool
    dropped: int = 0
    end: int | None = None
    pending: tuple[tuple[int, str], ...] = ()
    mark: str = ""
    rebuilt: bool = False


@dataclass(slots=True, frozen=True)
class SharedSummary:
    """The shared record as the one process that claimed the summary reads it."""

    length: int
    first_error: tuple[int, str] | None
    labels: Mapping[str, str]
    success: bool | None
    conversation_id: str | None
    created_ns: int | None


@dataclass(slots=True, frozen=True)
class Held:
    """``end(hold=True)`` did not claim the summary: other replicas' steps are pending (their
    finishes carry what T and FED need); wait from ``mark`` and ask again."""

    pending: tuple[tuple[int, str], ...]
    mark: str


class Posted(Protocol):
    """A finish written to the store whose answer has not been read (``SharedRecord.post``)."""

    @property
    def done(self) -> bool: ...


class SharedRecord(Protocol):
    """One trajectory's record in a shared store. ``events`` are encoded by ``shared.py``:
    a type character then JSON (``p`` produced, ``i`` invalidated, ``t`` a text seen, ``l``
    the leaves of a result seen, ``f`` a failure) or a step (``d``: that step's finish); the
    store keeps them in order and bounds the seen ones. Each method is one atomic round trip
    and raises :class:`TrajectoryStoreError`, but :meth:`post`, which does not wait for its
    answer (the callback hears it, an error included). ``cursor``: the log entries the
    replica has applied; ``floor``: the largest step it knows (T is raised to it: steps
    taken while the store did not answer, or in a record the store forgot since, are never
    taken again). ``flags`` of a step
    (``begin``): empty, or ``w`` (its finish may write) and ``i`` (it may invalidate): such
    a step is pending until its ``d`` event lands. ``begin_token``: unique per begin; a begin
    that raised may still run in the store, later: the replica says so (:meth:`gave_up`)
    and the store reconciles it with the next round trip it answers."""

    @property
    def store_name(self) -> str: ...

    @property
    def wait_timeout(self) -> float: ...

    def join(
        self,
        cursor: int,
        floor: int,
        labels: Mapping[str, str],
        conversation_id: str | None,
        events: Sequence[str],
    ) -> Sync: ...

    def begin(
        self,
        cursor: int,
        floor: int,
        call_id: str | None,
        given: int | None,
        flags: str,
        events: Sequence[str],
        begin_token: str,
    ) -> tuple[int, Sync]: ...

    def gave_up(self, begin_token: str, step: int, given: bool, call_id: str | None = None) -> None:
        """The begin ``begin_token`` (of ``call_id``) raised; its call went on at ``step``
        (``given``: the step another process assigned it, else a provisional or reserved
        one): the next round trip answered keeps the step the begin took if it ran, else
        counts the call once (one whose id has a reserved step, by its reservation) and
        refuses the begin should it arrive later."""

    def gave_up_reserving(self, token: str, steps: Sequence[tuple[str | None, int]]) -> None:
        """The reservation ``token`` raised, having given ``steps`` (call id, step) out
        provisionally: reconciled as :meth:`gave_up` (its steps kept if it ran, else its
        calls reserved once, and the reservation refused should it arrive later)."""

    def reserve(
        self,
        cursor: int,
        floor: int,
        call_ids: Sequence[str | None],
        events: Sequence[str],
        token: str,
    ) -> tuple[list[int], Sync]: ...

    def sync(self, cursor: int, floor: int, events: Sequence[str]) -> Sync: ...

    def wait(self, cursor: int, floor: int, mark: str, seconds: float) -> Sync: ...

    def post(
        self,
        floor: int,
        events: Sequence[str],
        done: Callable[[int, TrajectoryStoreError | None], None],
    ) -> Posted: ...

    def settle(self, posted: Posted) -> None: ...

    def end(
        self,
        floor: int,
        claim: bool,
        owner: str,
        success: bool | None,
        labels: Mapping[str, str],
        events: Sequence[str],
        hold: bool,
    ) -> SharedSummary | Held | None: ...


class TrajectoryStore:
    """Where a guard's trajectories keep their record (``Guard(store=...)``). The base class
    keeps it in this process's memory; a shared store overrides :meth:`record`
    (``store_url.py`` picks one from a URL, ``shared.py`` opens a trajectory in it)."""

    name = MEMORY

    def record(self, trajectory_id: str, token: str = "") -> SharedRecord | None:
        """The shared record of ``trajectory_id`` as the replica ``token`` writes it; None:
        kept in this process only."""
        return None

    def close(self) -> None:
        """Let go of the store's connections (nothing to do in memory)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class MemoryStore(TrajectoryStore):
    """Trajectories in this process's memory: the default."""


def redact(url: str) -> str:
    """A store URL as messages show it: without its password."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest = rest.partition("?")[0]  # a password= query option goes too
    return f"{scheme}://{rest.rpartition('@')[2]}"
