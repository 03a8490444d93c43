"""The trajectory store on Redis (``redis-py``, the ``[redis]`` extra): :class:`RedisStore`.

Per trajectory, four keys sharing one hash tag (one Cluster slot), expiring after the idle
timeout since the last round trip:

- ``{prefix}{id}:m`` a hash: ``n`` the largest step taken (T), ``fs``/``fc`` the first
  failure's step and cause, ``c`` when it was first seen (ms), ``cv`` the conversation id,
  ``y`` the outcome, ``sb`` the bytes of seen values kept, ``ln`` the log's length,
  ``r:<call id>`` the steps reserved by call id, ``p:<step>`` the steps whose finish has
  not landed (``pc`` of them), ``l:<key>`` the labels, ``e`` when the keys' expiry is next
  renewed, ``w`` until when finishes notify waiters, ``g`` the record's generation (set when
  it is started, again after the store forgot it: ``redis_scripts.py``), ``bk`` once the
  begin tokens' key exists, and ``s`` the summary's claim (the one process that sets it
  writes the summary);
- ``{prefix}{id}:l`` the log: every binding, invalidation, value seen and step reserved by
  call id, in order (``shared.py`` writes and reads it); the seen values are bounded by
  ``seen_limit`` bytes per trajectory (beyond it they are dropped, and the writer says so
  once), the rest never;
- ``{prefix}{id}:f`` a short stream a replica waiting for another's finish blocks on;
- ``{prefix}{id}:b`` a hash: each begin's token and the step it took, each reservation's
  token (``r``), or ``x`` (given up by its replica, never to run), and ``u:<call id>`` the
  step of a call begun with an id none was reserved for (``redis_scripts.py`` says why).

Every operation is one Lua script (``redis_scripts.py``): one round trip, atomic (no
read-modify-write in Python), sent on a connection of the store's own (``redis_lanes.py``).
A call's finish is posted: written before the call returns, its answer read later. Every
command has a timeout (``timeout`` seconds to connect and to answer) and none is retried
(a begin or a reservation not answered in time is reconciled instead, with the replica's next
round trip that is: :meth:`RedisRecord.gave_up`, ``redis_given_up.py``).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._extras import install_hint
from .redis_given_up import GivenUp
from .redis_lanes import Lanes, Ticket
from .redis_scripts import PRELUDE, SCRIPTS
from .store import (
    Held,
    Posted,
    SharedRecord,
    SharedSummary,
    Sync,
    TrajectoryStore,
    TrajectoryStoreError,
    redact,
)

TIMEOUT = 0.5  # seconds: connecting, and each round trip
SEEN_LIMIT = 4 * 1024 * 1024  # bytes of seen values kept per trajectory
_TAG_LIMIT = 200  # longer ids (or ids with braces) are keyed by their digest


class RedisStore(TrajectoryStore):
    """Trajectories shared through Redis at ``url`` (``redis://host:6379/0``,
    ``rediss://...``, ``unix:///path``; redis-py's URL options override the keywords).

    ``timeout``: seconds to connect and for each round trip (a store slower than that is a
    store that did not answer: the guard's ``on_guard_error`` decides). ``idle_timeout``: a
    trajectory without a round trip for this long is forgotten. ``seen_limit``: bytes of
    seen values (user input, tool results) kept per trajectory for the information check.
    ``prefix`` starts every key. ``client``: a ``redis.Redis`` of your own instead of
    ``url``'s (its timeouts are then yours)."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        timeout: float = TIMEOUT,
        idle_timeout: float = 3600.0,
        seen_limit: int = SEEN_LIMIT,
        prefix: str = "toolguard:",
        client: Any = None,
    ) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as exc:
            raise ImportError(
                f"the Redis trajectory store needs redis-py ({exc.name} is not installed): "
                f"{install_hint('redis')}",
                name=exc.name,
            ) from exc
        if idle_timeout <= 0:
            raise ValueError("idle_timeout must be positive: the store's keys must expire")
        self.name = redact(url)
        self.timeout = timeout
        self.ttl_ms = max(1, int(idle_timeout * 1000))
        self.seen_limit = seen_limit
        self.prefix = prefix
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        if client is None:
            client = redis.Redis.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),
                retry_on_timeout=False,
                health_check_interval=0,
                decode_responses=True,
            )
        self.client = client
        self._sources = {k: PRELUDE + v for k, v in SCRIPTS.items()}
        self._sha = {
            k: hashlib.sha1(v.encode("utf-8")).hexdigest() for k, v in self._sources.items()
        }
        self._no_script: type[BaseException] = redis.exceptions.NoScriptError
        self.lanes = Lanes(client.connection_pool, redis.ResponseError)
        self.lanes.on_connect(self._load)
        # A process that exits right after a call: its posted finish is read before the
        # sockets close (a socket closed with an unread answer may be reset, and Redis may
        # then drop the finish it had not read yet).
        atexit.register(_settle_at_exit, weakref.ref(self.lanes))

    def _load(self, conn: Any) -> None:
        """Every script loaded on a new connection, in one round trip (a restarted server
        has none)."""
        conn.send_packed_command(
            conn.pack_commands([("SCRIPT", "LOAD", v) for v in self._sources.values()]), False
        )
        for _ in self._sources:
            conn.read_response()

    def record(self, trajectory_id: str, token: str = "") -> SharedRecord:
        return RedisRecord(self, trajectory_id, token)

    def run(self, script: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """One script, one round trip."""
        command = ("EVALSHA", self._sha[script], len(keys), *keys, *args)
        try:
            try:
                return self.lanes.call([command])[0]
            except self._no_script:  # flushed since the connection loaded them: not run
                return self.lanes.call([("SCRIPT", "LOAD", self._sources[script]), command])[1]
        except self._errors as exc:
            raise TrajectoryStoreError(f"{type(exc).__name__}: {exc}") from exc

    def wait_then(
        self,
        stream: str,
        mark: str,
        seconds: float,
        script: str,
        keys: Sequence[str],
        args: Sequence[Any],
    ) -> Any:
        """Block in Redis until an entry after ``mark`` lands in ``stream`` (or ``seconds``
        pass), then run ``script``: one round trip (the connection's next command runs
        once the blocking read returns)."""
        block = max(1, int(seconds * 1000))
        commands = [
            ("XREAD", "BLOCK", block, "COUNT", 1, "STREAMS", stream, mark),
            ("EVALSHA", self._sha[script], len(keys), *keys, *args),
        ]
        try:
            return self.lanes.call(commands, timeout=seconds + self.timeout)[1]
        except self._errors as exc:
            raise TrajectoryStoreError(f"{type(exc).__name__}: {exc}") from exc

    def post(
        self,
        script: str,
        keys: Sequence[str],
        args: Sequence[Any],
        done: Callable[[Any, BaseException | None], None],
    ) -> Ticket:
        """Write one script now; ``done(reply, error)`` hears its answer when it is read."""
        command = ("EVALSHA", self._sha[script], len(keys), *keys, *args)
        return self.lanes.post(command, done)

    def keys(self, trajectory_id: str) -> list[str]:
        tag = trajectory_id
        if len(tag) > _TAG_LIMIT or "{" in tag or "}" in tag:
            tag = "sha256:" + hashlib.sha256(tag.encode("utf-8", "surrogatepass")).hexdigest()
        base = f"{self.prefix}{{{tag}}}"
        return [f"{base}:m", f"{base}:l", f"{base}:f", f"{base}:b"]

    def close(self) -> None:
        """Read the answers still owed, then let the connections go."""
        self.lanes.close()
        with contextlib.suppress(*self._errors):
            self.client.close()

    def __repr__(self) -> str:
        return f"RedisStore({self.name!r})"


class RedisRecord:
    """One trajectory's record in a :class:`RedisStore` (the ``SharedRecord`` of store.py),
    as the replica ``token`` writes it."""

    __slots__ = ("_generation", "_given_up", "_keys", "_store", "_token")

    def __init__(self, store: RedisStore, trajectory_id: str, token: str) -> None:
        self._store = store
        self._keys = store.keys(trajectory_id)
        self._token = token
        self._generation = ""  # the record's generation as the last answer gave it
        # begins and reservations not answered in time, reconciled by the next answer
        self._given_up = GivenUp()

    @property
    def store_name(self) -> str:
        return self._store.name

    @property
    def wait_timeout(self) -> float:
        return self._store.timeout

    def gave_up(self, begin_token: str, step: int, given: bool, call_id: str | None = None) -> None:
        """The begin ``begin_token`` (of ``call_id``) was not answered in time; its call goes
        on at ``step`` (``given``: a step another process assigned, else a provisional or
        reserved one). Sent with every round trip from now on until one is answered: the
        store then keeps the step the begin took if it ran, else counts the call once (a
        reserved one by its reservation) and refuses the begin should it still arrive."""
        self._given_up.begin(begin_token, step, given, call_id)

    def gave_up_reserving(self, token: str, steps: Sequence[tuple[str | None, int]]) -> None:
        """The reservation ``token`` was not answered in time; it gave ``steps`` (call id,
        step) out provisionally. Reconciled as :meth:`gave_up`: kept if it ran, else its
        calls reserved once now and the reservation refused should it still arrive."""
        self._given_up.reserving(token, steps)

    def _run(self, script: str, args: list[Any]) -> Any:
        """``script`` with the common arguments first (``args`` its own), reconciling what
        was given up so far: once it is answered they are done."""
        cursor, floor, *own = args
        given_up, carried = self._given_up.carried()
        reply = self._store.run(script, self._keys, [*self._args(cursor, floor, given_up), *own])
        self._given_up.reconciled(carried)
        return reply

    def _args(self, cursor: int, floor: int, given_up: str) -> list[Any]:
        store = self._store
        return [
            store.ttl_ms,
            cursor,
            time.time_ns() // 1_000_000,
            store.seen_limit,
            floor,
            self._token,
            int(store.timeout * 1000),
            self._generation,
            given_up,
        ]

    def join(
        self,
        cursor: int,
        floor: int,
        labels: Mapping[str, str],
        conversation_id: str | None,
        events: Sequence[str],
    ) -> Sync:
        flat = [x for item in labels.items() for x in item]
        args = [cursor, floor, conversation_id or "", len(labels), *flat, *events]
        return self._sync(self._run("join", args))

    def begin(
        self,
        cursor: int,
        floor: int,
        call_id: str | None,
        given: int | None,
        flags: str,
        events: Sequence[str],
        begin_token: str,
    ) -> tuple[int, Sync]:
        given_arg = "" if given is None else given
        args = [cursor, floor, call_id or "", given_arg, flags, begin_token, *events]
        reply = self._run("begin", args)
        return int(reply[11]), self._sync(reply)

    def reserve(
        self,
        cursor: int,
        floor: int,
        call_ids: Sequence[str | None],
        events: Sequence[str],
        token: str,
    ) -> tuple[list[int], Sync]:
        ids = [c or "" for c in call_ids]
        reply = self._run("reserve", [cursor, floor, token, len(ids), *ids, *events])
        return [int(s) for s in reply[11]], self._sync(reply)

    def sync(self, cursor: int, floor: int, events: Sequence[str]) -> Sync:
        return self._sync(self._run("sync", [cursor, floor, *events]))

    def wait(self, cursor: int, floor: int, mark: str, seconds: float) -> Sync:
        given_up, carried = self._given_up.carried()
        args = self._args(cursor, floor, given_up)
        reply = self._store.wait_then(self._keys[2], mark, seconds, "sync", self._keys, args)
        self._given_up.reconciled(carried)
        return self._sync(reply)

    def post(
        self,
        floor: int,
        events: Sequence[str],
        done: Callable[[int, TrajectoryStoreError | None], None],
    ) -> Posted:
        given_up, carried = self._given_up.carried()

        def answered(reply: Any, error: BaseException | None) -> None:
            if error is None:
                self._given_up.reconciled(carried)
                done(int(reply), None)
            else:
                done(0, TrajectoryStoreError(f"{type(error).__name__}: {error}"))

        args = [*self._args(0, floor, given_up), *events]
        return self._store.post("finish", self._keys, args, answered)

    def settle(self, posted: Posted) -> None:
        assert isinstance(posted, Ticket)
        self._store.lanes.settle(posted)

    def end(
        self,
        floor: int,
        claim: bool,
        owner: str,
        success: bool | None,
        labels: Mapping[str, str],
        events: Sequence[str],
        hold: bool,
    ) -> SharedSummary | Held | None:
        outcome = "" if success is None else ("1" if success else "0")
        flat = [x for item in labels.items() for x in item]
        args = [
            0,
            floor,
            "1" if claim else "0",
            owner,
            outcome,
            "1" if hold else "0",
            len(labels),
            *flat,
            *events,
        ]
        reply = self._run("end", args)
        if reply[0] == 2:
            return Held(_pending(reply[1]), str(reply[2]))
        if not reply[0]:
            return None
        pairs = reply[1]
        meta = dict(zip(pairs[::2], pairs[1::2], strict=True))
        fs, y, created = meta.get("fs"), meta.get("y"), meta.get("c")
        return SharedSummary(
            length=int(meta.get("n", 0)),
            first_error=(int(fs), str(meta.get("fc", ""))) if fs is not None else None,
            labels={k[2:]: v for k, v in meta.items() if k.startswith("l:")},
            success=None if y is None else y == "1",
            conversation_id=meta.get("cv"),
            created_ns=int(created) * 1_000_000 if created is not None else None,
        )

    def _sync(self, reply: Sequence[Any]) -> Sync:
        """A sync reply; ``rebuilt`` when its generation is not the one the replica knew (the
        script then read the log from its start)."""
        known, generation = self._generation, str(reply[10])
        self._generation = generation
        return _sync(reply, bool(known) and generation != known)


def _settle_at_exit(lanes: weakref.ref[Lanes]) -> None:
    alive = lanes()
    if alive is not None:
        with contextlib.suppress(Exception):
            alive.settle_all()


def _pending(flat: Sequence[Any]) -> tuple[tuple[int, str], ...]:
    return tuple((int(flat[i]), str(flat[i + 1])) for i in range(0, len(flat), 2))


def _sync(reply: Sequence[Any], rebuilt: bool) -> Sync:
    start, entries, length, fs, fc, claimed, dropped, end, pending, mark = reply[:10]
    return Sync(
        start=int(start),
        entries=entries,
        length=int(length),
        first_error=(int(fs), str(fc)) if fs is not None else None,
        claimed=bool(claimed),
        dropped=int(dropped),
        end=int(end),
        pending=_pending(pending) if pending else (),
        mark=str(mark),
        rebuilt=rebuilt,
    )
