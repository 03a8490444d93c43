"""SQLiteSavepointFork: a dry run on a real SQLite connection, inside one savepoint, that
follows the tool's own transaction statements (docs/fork-and-plans.md, "SQLite details").

A tool's own COMMIT or ROLLBACK would end every savepoint on the connection, the dry run's
too, so during the dry run they must not run. Holding a COMMIT back is invisible to the
connection (its writes read the same before and after); a ROLLBACK is not (what it undid is
gone for every later statement). So the fork follows the *plain run* statement by statement
(:class:`Shadow`): which writes a plain run would have committed, rolled back or left
uncommitted, and when it keeps the call it ends the savepoint the way that reproduces them.
Held back, though, a COMMIT is invisible to other connections and keeps the write lock, so
for a single call (``fork_call``) the COMMIT that commits the call's writes is compiled for
real: it ends the savepoint as a plain run's would, and the rest of the call runs plainly.
A sequence it cannot reproduce exactly (a statement run after a ROLLBACK that undid writes,
writes both committed and rolled back in one call...) is refused: ``keep`` and ``discard``
roll everything back and raise :class:`ForkError`, a guard error.

Two hooks see the tool's statements. The authorizer (at compile time) turns BEGIN, COMMIT
and ROLLBACK into no-ops and denies a RELEASE or ROLLBACK TO of a savepoint the call did not
open. The trace callback (at every execution) feeds the shadow: sqlite3 caches compiled
statements, so a COMMIT run twice is compiled, and authorized, only once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Final

from ..._errors import ForkError, ToolDefinitionError
from .sqlite_plain import SAVEPOINT, Shadow

Authorizer = Callable[[int, str | None, str | None, str | None, str | None], int]


class _Savepoint:
    __slots__ = ("closed", "name", "shadow")

    def __init__(self, name: str, shadow: Shadow | None) -> None:
        self.name = name
        self.shadow = shadow
        self.closed = False


class SQLiteSavepointFork:
    """A real SQLite database, forked in place: ``SAVEPOINT`` before the dry run,
    ``ROLLBACK TO`` and ``RELEASE`` after it. The tool runs unchanged on ``connection``.

    The tool's own ``BEGIN``, ``COMMIT``/``END`` and ``ROLLBACK`` (also ``conn.commit()``,
    ``conn.rollback()`` and ``executescript``'s implicit COMMIT) are held back while it runs,
    and its ``SAVEPOINT``, ``RELEASE`` and ``ROLLBACK TO`` run nested in the fork's. The fork
    follows what a plain run would have done with them: kept, the call leaves the connection
    as a plain run would (committed, rolled back, or a transaction left open); rejected,
    exactly as it was. A sequence it cannot reproduce is refused with :class:`ForkError`
    (a guard error), its writes rolled back (module docstring).

    The savepoint covers this connection only: other connections see only what is committed.
    For one call (``fork_call``, what the guard's transactional dry run uses) the tool's
    COMMIT that commits its writes is carried out, as in a plain run, where the application
    had no transaction open: rejected after it, ``discard`` raises :class:`ForkError` saying
    the commit stands. Held back (``fork``, for plans, or the application's transaction), a
    COMMIT is not seen by other connections, and one that writes waits on the savepoint's
    lock until its busy timeout.

    SQLite keeps one authorizer and one trace callback per connection: an application that
    sets its own passes it as ``authorizer`` or ``trace_callback``; the fork chains it during
    the dry run and puts it back after. ``guard_transactions=False`` installs neither: a tool
    that then ends the transaction during the dry run makes ``discard`` raise
    :class:`ForkError` (its writes may be committed by then).

    One dry run at a time per connection: the savepoint covers every write made on the
    connection while it is open, also another task's real call.
    """

    in_place: Final = True

    def __init__(
        self,
        connection: sqlite3.Connection,
        *,
        authorizer: Authorizer | None = None,
        trace_callback: Callable[[str], object] | None = None,
        guard_transactions: bool = True,
    ) -> None:
        if not isinstance(connection, sqlite3.Connection):
            raise ToolDefinitionError(
                f"SQLiteSavepointFork needs a sqlite3.Connection, not {type(connection).__name__}"
            )
        for name, hook in (("authorizer", authorizer), ("trace_callback", trace_callback)):
            if hook is not None and not callable(hook):
                raise ToolDefinitionError(f"SQLiteSavepointFork: {name} must be callable")
        self.connection = connection
        self.authorizer = authorizer
        self.trace_callback = trace_callback
        self.guard_transactions = guard_transactions
        self._shadow: Shadow | None = None  # the dry run the hooks report to
        self._ignored = False  # a transaction statement was compiled to a no-op
        self._compiled: int | None = None  # the verdict on one compiled since the last trace

    def fork(self, state: Any) -> _Savepoint:
        """A fork that holds every COMMIT of the tool back: for plan verification, where a
        later step must still be undoable."""
        return self._open(single=False)

    def fork_call(self, state: Any) -> _Savepoint:
        """A fork for one call that is then kept or discarded (transaction.py): the COMMIT
        that commits the call's writes, where the application had no transaction open, is
        carried out as in a plain run, so other connections see it and its lock is freed."""
        return self._open(single=True)

    def _open(self, single: bool) -> _Savepoint:
        connection = self.connection
        shadow = Shadow(connection) if self.guard_transactions else None
        connection.execute(f'SAVEPOINT "{SAVEPOINT}"')
        if shadow is not None:
            shadow.changes, shadow.single = connection.total_changes, single
            self._shadow, self._ignored, self._compiled = shadow, False, None
            connection.set_authorizer(self._authorize)  # also recompiles cached statements
            connection.set_trace_callback(self._trace)
        return _Savepoint(SAVEPOINT, shadow)

    def keep(self, forked: _Savepoint) -> None:
        """The call stands: the savepoint ends the way a plain run's statements would have
        left the connection. With ``guard_transactions=False`` a tool that ended the
        savepoint itself (its COMMIT) has already kept what it did."""
        shadow = self._stop(forked)
        if shadow is not None and shadow.released is not None:
            forked.closed = True  # the tool's COMMIT ended it; the call ran plainly since
            if shadow.diverged is not None:
                raise ForkError(_stands(shadow))
            return
        if forked.closed:
            return
        connection = self.connection
        try:
            if not connection.in_transaction:
                raise sqlite3.OperationalError("no such savepoint: no transaction is open")
            if shadow is None:
                connection.execute(f'RELEASE "{forked.name}"')
                forked.closed = True
                return
            steps = shadow.ending() if shadow.refusal is None else shadow.refusal
            if isinstance(steps, str):
                self._roll_back(forked)
                raise ForkError(
                    f"{steps}: the dry run cannot reproduce the tool's own transaction "
                    "statements exactly, so it rolled the call back"
                )
            for sql in steps:
                connection.execute(sql)
                forked.closed = True  # the savepoint has ended: nothing left to roll back
        except sqlite3.OperationalError as exc:
            if shadow is None and "no such savepoint" in str(exc):
                forked.closed = True
                return
            raise ForkError(
                f"savepoint {forked.name} could not be released ({exc}): the call ended the "
                "transaction itself"
            ) from exc

    def discard(self, forked: _Savepoint) -> None:
        shadow = self._stop(forked)
        if shadow is not None and shadow.released is not None:
            self._after_release(forked, shadow)
        if forked.closed:
            return  # a refused keep already rolled it back
        self._roll_back(forked)
        if shadow is not None and shadow.refusal is not None:
            raise ForkError(
                f"{shadow.refusal}: the dry run cannot reproduce the tool's own transaction "
                "statements exactly, so what the call did (and why it failed) is not what a "
                "plain run does; it was rolled back"
            )

    def _after_release(self, forked: _Savepoint, shadow: Shadow) -> None:
        """Rejected after its COMMIT was carried out: what it committed cannot be undone (a
        plain run committed it too); what it left uncommitted since is rolled back, and the
        dry run is a guard error that says so, never a rejection as if nothing happened."""
        forked.closed = True
        connection = self.connection
        try:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise ForkError(f"{_stands(shadow)}; rolling back the rest failed ({exc})") from exc
        raise ForkError(_stands(shadow))

    def _roll_back(self, forked: _Savepoint) -> None:
        connection = self.connection
        forked.closed = True
        name = forked.name
        try:
            if not connection.in_transaction:
                raise sqlite3.OperationalError("no transaction is open")
            connection.execute(f'ROLLBACK TO "{name}"')
            connection.execute(f'RELEASE "{name}"')
        except sqlite3.Error as exc:
            raise ForkError(
                f"savepoint {name} could not be rolled back ({exc}): the dry run ended the "
                "transaction (a COMMIT or ROLLBACK with guard_transactions=False?), so its "
                "writes may have been committed"
            ) from exc

    def _stop(self, forked: _Savepoint) -> Shadow | None:
        """The tool has run: the hooks come off (once) and the shadow takes its last look."""
        shadow = forked.shadow
        if shadow is None or self._shadow is not shadow:
            return shadow
        self._shadow = None
        connection = self.connection
        shadow.look()
        shadow.absorb()
        connection.set_trace_callback(self.trace_callback)
        # Installing an authorizer expires every prepared statement (removing one does
        # not), so a COMMIT compiled as a no-op during the dry run and kept in sqlite3's
        # statement cache is compiled again, for real, when next used. Without such a
        # statement, every statement compiled as it would have anyway: none to expire.
        if self.authorizer is not None or self._ignored:
            connection.set_authorizer(self.authorizer or _allow_all)
        if self.authorizer is None:
            connection.set_authorizer(None)
        return shadow

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        if self.authorizer is not None:
            verdict = self.authorizer(action, arg1, arg2, db, source)
            if verdict != sqlite3.SQLITE_OK:
                return verdict
        shadow = self._shadow
        if shadow is not None:
            shadow.look()  # a COMMIT carried out since the last trace: released
            if shadow.released is not None:  # no savepoint left to protect: a plain run
                if action == sqlite3.SQLITE_TRANSACTION:
                    self._compiled = sqlite3.SQLITE_OK
                return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_TRANSACTION:
            if arg1 == "COMMIT" and shadow is not None and shadow.may_release():
                self._compiled = sqlite3.SQLITE_OK  # a real COMMIT, as in a plain run
            else:
                self._compiled, self._ignored = sqlite3.SQLITE_IGNORE, True
            return self._compiled  # IGNORE: compiled to nothing, the shadow follows it
        if (
            action == sqlite3.SQLITE_SAVEPOINT
            and arg1 != "BEGIN"
            and shadow is not None
            and shadow.find((arg2 or "").lower()) is None
        ):
            # The fork's savepoint or the application's: run, it would end the fork's.
            shadow.refuse(f"{arg1} {arg2}", "names a savepoint the call did not open")
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _trace(self, sql: str) -> None:
        shadow = self._shadow
        if shadow is not None:
            compiled, self._compiled = self._compiled, None
            try:
                shadow.statement(sql, compiled)
            except Exception as exc:  # a callback must not raise: SQLite would swallow it
                shadow.refuse(sql, f"could not be followed ({type(exc).__name__}: {exc})")
        if self.trace_callback is not None:
            self.trace_callback(sql)

    def __repr__(self) -> str:
        return f"SQLiteSavepointFork({self.connection!r})"


def _stands(shadow: Shadow) -> str:
    # What matters first: guard-error messages keep only the head and tail of this text.
    diverged = f", run diverged: {shadow.diverged};" if shadow.diverged else ":"
    return (
        f"commit stands{diverged} the tool's {(shadow.released or '').strip()} was carried "
        "out as in a plain run (a single call's dry run commits where the tool does, so "
        "other connections see it), so what the call wrote up to it and committed after it "
        "stands; what it left uncommitted after it is rolled back"
    )


def _allow_all(*_: Any) -> int:
    return sqlite3.SQLITE_OK
