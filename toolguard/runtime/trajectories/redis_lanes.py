"""The Redis store's connections, each with the replies it still owes: :class:`Lanes`.

A command is sent and its reply read on one connection (a lane) checked out for the
purpose; redis-py's client path (its pool checkout, retry and callback machinery per
command) cost more than the round trip itself on loopback, so the store packs and reads
on the connection directly. A command may also be *posted*: written to the socket and
its reply read later, by whoever next checks that lane out (replies come back in the
order the commands were sent), or by :meth:`Lanes.settle` when its sender needs the
outcome. A call's finish is posted, so the call does not wait for its round trip.

A lane whose socket failed is dropped; the replies it owed are answered with the error
(never lost: the poster's callback hears of it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger("toolguard")

_OWED_LIMIT = 64  # a lane owing more replies than this is read before the next send


class Ticket:
    """A posted command: ``done`` once its reply (or its error) has been handed to its
    callback."""

    __slots__ = ("callback", "done", "lane")

    def __init__(
        self, lane: Lane | None, callback: Callable[[Any, BaseException | None], None]
    ) -> None:
        self.lane = lane
        self.callback = callback
        self.done = False

    def answer(self, reply: Any, error: BaseException | None) -> None:
        self.done = True
        try:
            self.callback(reply, error)
        except Exception:  # a callback's own failure must not break the lane's next user
            logger.exception("toolguard: a store reply's handler failed")


class Lane:
    """One connection and the posted commands whose replies it has not read yet."""

    __slots__ = ("conn", "owed")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.owed: deque[Ticket] = deque()

    def read_owed(self, refused: type[BaseException]) -> None:
        """Read every reply this lane owes, in order; an error reply (``refused``: a
        script's) goes to its ticket; anything else fails every ticket and is raised (the
        lane is out of step: drop it)."""
        owed = self.owed
        while owed:
            ticket = owed[0]
            try:
                reply = self.conn.read_response()
            except refused as exc:  # an error reply: the lane is in step
                owed.popleft()
                ticket.answer(None, exc)
                continue
            except BaseException as exc:
                self.fail(exc)
                raise
            owed.popleft()
            ticket.answer(reply, None)

    def fail(self, exc: BaseException) -> None:
        """The socket failed: every owed reply is lost; their tickets hear the error."""
        with contextlib.suppress(Exception):
            self.conn.disconnect()
        owed, self.owed = self.owed, deque()
        for ticket in owed:
            ticket.answer(None, exc)


class Lanes:
    """The store's lanes: checked out one thread at a time, most recently used first (so
    a single-threaded caller keeps one connection, whose owed replies have arrived by the
    time it sends again)."""

    def __init__(self, pool: Any, refused: type[BaseException]) -> None:
        self._pool = pool
        self._refused = refused  # an error reply: the lane stays in step
        self._free: list[Lane] = []
        self._lock = threading.Lock()
        self._returned = threading.Condition(self._lock)
        self._waiting = 0  # threads settling a ticket whose lane is checked out
        self._pid = os.getpid()
        self._loaded: Callable[[Any], None] | None = None

    def on_connect(self, load: Callable[[Any], None]) -> None:
        """``load(conn)`` runs on every new connection (the store loads its scripts)."""
        self._loaded = load

    # -- checking out ------------------------------------------------------------------
    def _take(self) -> Lane:
        if os.getpid() != self._pid:  # a forked child never uses its parent's sockets
            with self._lock:
                self._free, self._pid = [], os.getpid()
        with self._lock:
            if self._free:
                return self._free.pop()
        conn = self._pool.get_connection()
        lane = Lane(conn)
        if self._loaded is not None:
            try:
                self._loaded(conn)
            except BaseException:
                self._drop(lane)
                raise
        return lane

    def _give(self, lane: Lane) -> None:
        with self._lock:
            self._free.append(lane)
            if self._waiting:
                self._returned.notify_all()

    def _drop(self, lane: Lane) -> None:
        with contextlib.suppress(Exception):
            self._pool.release(lane.conn)

    def _ready(self) -> Lane:
        """A lane owing nothing (its owed replies read; a lane that broke doing so is
        dropped and another taken: the command was not sent yet)."""
        while True:
            lane = self._take()
            if not lane.owed:
                return lane
            try:
                lane.read_owed(self._refused)
            except Exception:
                self._drop(lane)
                continue
            return lane

    # -- commands ----------------------------------------------------------------------
    def call(self, commands: Sequence[Sequence[Any]], timeout: float | None = None) -> list[Any]:
        """Send ``commands`` in one write and read their replies: one round trip. The
        replies the lane owed are read after the write (they come first: the server has
        likely sent them already, and the commands need not wait for them). An error
        reply is raised after every reply was read (the lane stays in step)."""
        lane = self._take()
        conn = lane.conn
        replies: list[Any] = []
        failed: BaseException | None = None
        try:
            if len(commands) == 1:
                conn.send_packed_command(conn.pack_command(*commands[0]), False)
            else:
                conn.send_packed_command(conn.pack_commands(commands), False)
            if lane.owed:
                lane.read_owed(self._refused)
            for _ in commands:
                try:
                    if timeout is None:
                        replies.append(conn.read_response())
                    else:
                        replies.append(conn.read_response(timeout=timeout))
                except self._refused as exc:  # an error reply
                    failed = failed or exc
                    replies.append(None)
        except BaseException as exc:
            lane.fail(exc)
            self._drop(lane)
            raise
        self._give(lane)
        if failed is not None:
            raise failed
        return replies

    def post(
        self, command: Sequence[Any], callback: Callable[[Any, BaseException | None], None]
    ) -> Ticket:
        """Write ``command`` now; its reply goes to ``callback(reply, error)`` when read (at
        once, with the error, when it cannot be written)."""
        try:
            lane = self._take()
            if len(lane.owed) >= _OWED_LIMIT:
                try:
                    lane.read_owed(self._refused)
                except Exception:
                    self._drop(lane)
                    lane = self._ready()
        except Exception as exc:  # no connection: the store is down
            ticket = Ticket(None, callback)
            ticket.answer(None, exc)
            return ticket
        ticket = Ticket(lane, callback)
        conn = lane.conn
        try:
            conn.send_packed_command(conn.pack_command(*command), False)
        except Exception as exc:
            lane.fail(exc)
            self._drop(lane)
            ticket.answer(None, exc)
            return ticket
        lane.owed.append(ticket)
        self._give(lane)
        return ticket

    def settle(self, ticket: Ticket) -> None:
        """Read replies until ``ticket``'s is read (its callback has run when this returns).
        A lane checked out by another thread owes nothing but what that thread posts, which
        it gives back at once: wait for it."""
        while not ticket.done:
            lane = ticket.lane
            assert lane is not None  # a ticket without a lane was answered when posted
            with self._lock:
                if ticket.done:
                    return
                if lane not in self._free:  # checked out: its user reads it or gives it back
                    self._waiting += 1
                    try:
                        self._returned.wait(1.0)
                    finally:
                        self._waiting -= 1
                    continue
                self._free.remove(lane)
            try:
                lane.read_owed(self._refused)
            except Exception:
                self._drop(lane)
                return
            self._give(lane)

    def settle_all(self) -> None:
        """Read every answer the free lanes owe."""
        with self._lock:
            lanes, self._free = self._free, []
        for lane in lanes:
            try:
                lane.read_owed(self._refused)
            except Exception:
                self._drop(lane)
                continue
            self._give(lane)

    def owed(self) -> int:
        """Replies the free lanes still owe (tests and the benchmark count them)."""
        with self._lock:
            return sum(len(lane.owed) for lane in self._free)

    def close(self) -> None:
        """Read what is owed, then let every free lane's connection go."""
        with self._lock:
            lanes, self._free = self._free, []
        for lane in lanes:
            with contextlib.suppress(Exception):
                lane.read_owed(self._refused)
            with contextlib.suppress(Exception):
                lane.conn.disconnect()
            self._drop(lane)
