"""Which trajectory store a guard uses: ``Guard(store=...)``, or ``$TOOLGUARD_STORE``."""

from __future__ import annotations

import os

from .store import MEMORY, MemoryStore, TrajectoryStore, redact

ENV = "TOOLGUARD_STORE"  # the store a Guard built without store= uses: memory or redis://...


def store_from(store: TrajectoryStore | str | None, idle_timeout: float | None) -> TrajectoryStore:
    """``Guard(store=...)``: a store, a URL (``memory``, ``redis://...``, ``rediss://...``,
    ``unix://...``), or None for ``$TOOLGUARD_STORE`` (unset: memory). A store made from a
    URL forgets a trajectory idle for ``idle_timeout`` seconds (the guard's
    ``trajectory_idle_timeout``; None: a day)."""
    if isinstance(store, TrajectoryStore):
        return store
    where = "store="
    if store is None:
        store = os.environ.get(ENV, "").strip() or MEMORY
        where = f"${ENV}"
    if not isinstance(store, str):
        raise ValueError(
            f"store= takes a TrajectoryStore or a URL string, not {type(store).__name__}"
        )
    if store == MEMORY:
        return MemoryStore()
    scheme = store.partition("://")[0].lower()
    if scheme in ("redis", "rediss", "unix"):
        from .redis_store import RedisStore

        return RedisStore(store, idle_timeout=idle_timeout if idle_timeout else 86_400.0)
    raise ValueError(
        f"{where}: {redact(store)!r} is no trajectory store: use 'memory' or a Redis URL "
        "(redis://host:6379/0, rediss://..., unix:///path/redis.sock)"
    )
