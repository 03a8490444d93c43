"""The guard's work off the event loop when its trajectories live in a shared store.

A guard with a shared store (``--store redis://...``) takes a round trip to the store for a
call's check, and may for its finish, a refusal's record, a trajectory's opening and its
end. Those round trips block (the store is synchronous, bounded by its own timeout): run on
the event loop, a store that accepts connections and never answers held every request of
every session behind the one waiting, ``ping`` included, so concurrent calls waited the
timeout once per call ahead of them. With a shared store they run in worker threads
instead: each call waits its own round trip, at most the store's timeout, and what needs no
store (``ping``, tool lists) is answered at once. The guard is thread-safe; a call still
fails closed when the store does not answer (``on_guard_error``), as before.

``GuardedClient`` and ``guard_server`` run in the app's own event loop, whichever anyio
backend it is: their round trips go through :meth:`Offload.call`, which waits for its thread
even when the caller is cancelled meanwhile (the call it started is then closed as
cancelled by the caller's next step, not left without a verdict).

With the in-memory store nothing is offloaded: the check takes microseconds, and a thread
hop per call would cost more than it (adapters/mcp/bench.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import toolguard as tg

T = TypeVar("T")

# Calls waiting on the store at once, at most; more wait for a thread. Bounded so that a hung
# store cannot make the proxy start a thread per request without end.
MAX_THREADS = 64


def shared_store(guard: tg.Guard) -> bool:
    """Whether ``guard`` keeps its trajectories in a shared store (round trips that block)."""
    return type(guard.store).record is not tg.TrajectoryStore.record


class Offload:
    """Runs the guard's blocking work in a bounded pool of threads when ``on`` (the guard
    has a shared store), else inline."""

    def __init__(self, guard: tg.Guard, *, threads: int = MAX_THREADS) -> None:
        self.on = shared_store(guard)
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` in a worker thread, with the caller's context (the call's trace
        parent, the proxy's notes for its span); the future of its result."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="toolguard-store")
            pool = self._pool
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args)
        return asyncio.get_running_loop().run_in_executor(pool, call)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``: in a worker thread when ``on``, else here."""
        if not self.on:
            return fn(*args)
        return await self.submit(fn, *args)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``: in a worker thread when ``on`` (any anyio backend), with
        the caller's context, else here. A cancellation of the caller waits for the thread,
        so what ``fn`` started (a call, a trajectory) is handed back and closed by the
        caller rather than lost."""
        if not self.on:
            return fn(*args, **kwargs)
        with self._lock:
            if self._limiter is None:
                self._limiter = anyio.CapacityLimiter(self.threads)
            limiter = self._limiter
        # anyio runs it in a copy of the caller's context (the call's trace parent).
        return await anyio.to_thread.run_sync(
            functools.partial(fn, *args, **kwargs), limiter=limiter
        )

    def close(self) -> None:
        """Wait for the work still running (finishes posted to the store, refusals recorded),
        so the summaries written next count them."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


class KeyLocks:
    """One lock per key while someone holds it: calls checked in threads at once open their
    session's trajectory once, and calls of other sessions do not wait for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._lock:
            lock, users = self._held.get(key, (None, 0))
            if lock is None:
                lock = threading.Lock()
            self._held[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._held[key]
                if users == 1:
                    del self._held[key]
                else:
                    self._held[key] = (lock, users - 1)
