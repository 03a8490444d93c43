"""The trajectory store on Redis (``redis-py``, the ``[redis]`` extra): :class:`RedisStore`.

Per trajectory, two keys sharing one hash tag (one Cluster slot), both expiring after the
idle timeout, renewed by every round trip:

- ``{prefix}{id}:m`` a hash: ``n`` the largest step taken (T), ``fs``/``fc`` the first
  failure's step and cause, ``c`` when it was first seen (ms), ``cv`` the conversation id,
  ``y`` the outcome, ``sb`` the bytes of seen values kept, ``r:<call id>`` the steps
  reserved by call id, ``l:<key>`` the labels, and ``s`` the summary's claim (``HSETNX``:
  the one process that sets it writes the summary);
- ``{prefix}{id}:l`` the log: every binding, invalidation and value seen, in order
  (``shared.py`` writes and reads it); the seen values are bounded by ``seen_limit`` bytes
  per trajectory (beyond it they are dropped, and the writer says so once), the bindings
  never.

Every operation is one Lua script: one round trip, atomic (no read-modify-write in Python).
Every command has a timeout (``timeout`` seconds to connect and to answer) and none is
retried: a script that takes a step must not run twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..._extras import install_hint
from .store import SharedRecord, SharedSummary, Sync, TrajectoryStore, TrajectoryStoreError, redact

TIMEOUT = 0.5  # seconds: connecting, and each round trip
SEEN_LIMIT = 4 * 1024 * 1024  # bytes of seen values kept per trajectory
_TAG_LIMIT = 200  # longer ids (or ids with braces) are keyed by their digest

_PRELUDE = """
local ttl, cursor, limit, floor = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4]),
  tonumber(ARGV[5])
local function raise(step)
  local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
  if step > n then redis.call('HSET', KEYS[1], 'n', step) end
end
local function fail(step, cause)
  local fs = redis.call('HGET', KEYS[1], 'fs')
  if not fs or step < tonumber(fs) then redis.call('HSET', KEYS[1], 'fs', step, 'fc', cause) end
end
-- the steps the replica took while the store did not answer are never taken again
if floor > 0 then raise(floor) end
local function push(from)
  if #ARGV < from then return 0 end
  local dropped, seen, added, batch = 0, tonumber(redis.call('HGET', KEYS[1], 'sb') or '0'), 0, {}
  for i = from, #ARGV do
    local ev = ARGV[i]
    local t = string.sub(ev, 1, 1)
    if t == 't' or t == 'l' then
      if seen + added + #ev > limit then dropped = dropped + 1
      else added = added + #ev; batch[#batch + 1] = ev end
    elseif t == 'f' then
      local d = cjson.decode(string.sub(ev, 2)); raise(d[2]); fail(d[2], d[3])
    else batch[#batch + 1] = ev end
    if #batch >= 1000 then redis.call('RPUSH', KEYS[2], unpack(batch)); batch = {} end
  end
  if #batch > 0 then redis.call('RPUSH', KEYS[2], unpack(batch)) end
  if added > 0 then redis.call('HINCRBY', KEYS[1], 'sb', added) end
  return dropped
end
local function expire()
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
local function tail(dropped)
  expire()
  local m = redis.call('HMGET', KEYS[1], 'n', 'fs', 'fc', 's')
  return {cursor, redis.call('LRANGE', KEYS[2], cursor, -1), tonumber(m[1] or '0'),
          m[2], m[3], m[4] and 1 or 0, dropped}
end
"""

_BEGIN = """
local step
if ARGV[7] ~= '' then
  step = tonumber(ARGV[7]); raise(step)
  if ARGV[6] ~= '' then redis.call('HDEL', KEYS[1], 'r:' .. ARGV[6]) end
elseif ARGV[6] ~= '' then
  local r = redis.call('HGET', KEYS[1], 'r:' .. ARGV[6])
  if r then step = tonumber(r); redis.call('HDEL', KEYS[1], 'r:' .. ARGV[6]) end
end
if not step then
  step = redis.call('HINCRBY', KEYS[1], 'n', 1)
  if step == 1 then redis.call('HSETNX', KEYS[1], 'c', ARGV[3]) end
end
local out = tail(push(8))
out[8] = step
return out
"""

_RESERVE = """
redis.call('HSETNX', KEYS[1], 'c', ARGV[3])
local k, steps = tonumber(ARGV[6]), {}
for i = 1, k do
  local id, r = ARGV[6 + i], false
  if id ~= '' then r = redis.call('HGET', KEYS[1], 'r:' .. id) end
  if r then steps[i] = tonumber(r)
  else
    steps[i] = redis.call('HINCRBY', KEYS[1], 'n', 1)
    if id ~= '' then redis.call('HSET', KEYS[1], 'r:' .. id, steps[i]) end
  end
end
local out = tail(push(7 + k))
out[8] = steps
return out
"""

_FINISH = """
if ARGV[7] ~= '' then fail(tonumber(ARGV[6]), ARGV[7]) end
return tail(push(8))
"""

_JOIN = """
redis.call('HSETNX', KEYS[1], 'c', ARGV[3])
if ARGV[6] ~= '' then redis.call('HSETNX', KEYS[1], 'cv', ARGV[6]) end
local k = tonumber(ARGV[7])
for i = 0, k - 1 do redis.call('HSET', KEYS[1], 'l:' .. ARGV[8 + 2 * i], ARGV[9 + 2 * i]) end
return tail(push(8 + 2 * k))
"""

_END = """
local k = tonumber(ARGV[9])
for i = 0, k - 1 do redis.call('HSET', KEYS[1], 'l:' .. ARGV[10 + 2 * i], ARGV[11 + 2 * i]) end
push(10 + 2 * k)
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'y', ARGV[8]) end
expire()
if ARGV[6] ~= '1' or redis.call('HSETNX', KEYS[1], 's', ARGV[7]) == 0 then return {0} end
return {1, redis.call('HGETALL', KEYS[1])}
"""


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
        scripts = {"begin": _BEGIN, "reserve": _RESERVE, "finish": _FINISH}
        scripts |= {"join": _JOIN, "end": _END}
        self._scripts = {k: client.register_script(_PRELUDE + v) for k, v in scripts.items()}

    def record(self, trajectory_id: str) -> SharedRecord:
        return RedisRecord(self, trajectory_id)

    def run(self, script: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """One script, one round trip (after the first, which loads it)."""
        try:
            return self._scripts[script](keys=keys, args=args)
        except self._errors as exc:
            raise TrajectoryStoreError(f"{type(exc).__name__}: {exc}") from exc

    def keys(self, trajectory_id: str) -> list[str]:
        tag = trajectory_id
        if len(tag) > _TAG_LIMIT or "{" in tag or "}" in tag:
            tag = "sha256:" + hashlib.sha256(tag.encode("utf-8", "surrogatepass")).hexdigest()
        base = f"{self.prefix}{{{tag}}}"
        return [f"{base}:m", f"{base}:l"]

    def close(self) -> None:
        with contextlib.suppress(*self._errors):
            self.client.close()

    def __repr__(self) -> str:
        return f"RedisStore({self.name!r})"


class RedisRecord:
    """One trajectory's record in a :class:`RedisStore` (the ``SharedRecord`` of store.py)."""

    __slots__ = ("_keys", "_store")

    def __init__(self, store: RedisStore, trajectory_id: str) -> None:
        self._store = store
        self._keys = store.keys(trajectory_id)

    @property
    def store_name(self) -> str:
        return self._store.name

    def _args(self, cursor: int, floor: int) -> list[Any]:
        store = self._store
        return [store.ttl_ms, cursor, time.time_ns() // 1_000_000, store.seen_limit, floor]

    def join(
        self,
        cursor: int,
        floor: int,
        labels: Mapping[str, str],
        conversation_id: str | None,
        events: Sequence[str],
    ) -> Sync:
        flat = [x for item in labels.items() for x in item]
        args = [*self._args(cursor, floor), conversation_id or "", len(labels), *flat, *events]
        return _sync(self._store.run("join", self._keys, args))

    def begin(
        self, cursor: int, floor: int, call_id: str | None, given: int | None, events: Sequence[str]
    ) -> tuple[int, Sync]:
        given_arg = "" if given is None else given
        args = [*self._args(cursor, floor), call_id or "", given_arg, *events]
        reply = self._store.run("begin", self._keys, args)
        return int(reply[7]), _sync(reply)

    def reserve(
        self, cursor: int, floor: int, call_ids: Sequence[str | None], events: Sequence[str]
    ) -> tuple[list[int], Sync]:
        ids = [c or "" for c in call_ids]
        args = [*self._args(cursor, floor), len(ids), *ids, *events]
        reply = self._store.run("reserve", self._keys, args)
        return [int(s) for s in reply[7]], _sync(reply)

    def finish(
        self, cursor: int, floor: int, step: int | None, cause: str | None, events: Sequence[str]
    ) -> Sync:
        step_arg = "" if step is None else step
        args = [*self._args(cursor, floor), step_arg, cause or "", *events]
        return _sync(self._store.run("finish", self._keys, args))

    def end(
        self,
        floor: int,
        claim: bool,
        owner: str,
        success: bool | None,
        labels: Mapping[str, str],
        events: Sequence[str],
    ) -> SharedSummary | None:
        outcome = "" if success is None else ("1" if success else "0")
        flat = [x for item in labels.items() for x in item]
        args = [
            *self._args(0, floor),
            "1" if claim else "0",
            owner,
            outcome,
            len(labels),
            *flat,
            *events,
        ]
        reply = self._store.run("end", self._keys, args)
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


def _sync(reply: Sequence[Any]) -> Sync:
    start, entries, length, fs, fc, claimed, dropped = reply[:7]
    return Sync(
        start=int(start),
        entries=entries,
        length=int(length),
        first_error=(int(fs), str(fc)) if fs is not None else None,
        claimed=bool(claimed),
        dropped=int(dropped),
    )
