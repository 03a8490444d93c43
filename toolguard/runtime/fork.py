"""Fork strategies: how a dry run gets a copy of the state to try a call on.

A dry run (docs/fork-and-plans.md) runs a call on ``strategy.fork(state)`` before the real
execution and always calls ``strategy.discard(forked)`` after it. Two families:

- **copying** strategies (:class:`DeepCopyFork`, a :class:`CallbackFork` by default) return a
  new object; the tool then runs on that object (a method tool on the forked instance, a
  function tool through its ``tg.State`` parameter);
- **in-place** strategies (``in_place = True``: :class:`SQLiteSavepointFork`,
  :class:`UndoLogFork`, or a ``CallbackFork(..., in_place=True)``) isolate the changes some
  other way (a savepoint, an undo log) and the tool runs unchanged on the real objects
  between ``fork`` and ``discard``.

An in-place strategy that can also ``keep(forked)`` (commit what the call did) is
*transactional*: the dry run is then the call itself, run once. Accepted, its effects are
kept and its result is the call's; rejected, they are rolled back and the call is blocked.
No second execution, so the dry run costs only what the transaction costs.

This module imports nothing else of the runtime (undolog.py is a leaf too).
"""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Callable
from typing import Any, Final, Protocol, runtime_checkable

from .._errors import ForkError, ToolDefinitionError
from .undolog import Journal

DRY_RUN_CHECK: Final = "state.dry_run"  # the check id of every failure a dry run finds


@runtime_checkable
class ForkStrategy(Protocol):
    """How a dry run forks the state: ``fork(state) -> forked``, ``discard(forked)``.

    ``discard`` is always called once per successful ``fork`` (also when the dry run raised).
    An optional class or instance attribute ``in_place = True`` says the strategy isolates
    the dry run's changes without a new object (a savepoint): the tool then runs unchanged.
    An in-place strategy may also have ``keep(forked)``, which commits what the call did:
    the guard then calls exactly one of ``keep`` (the environment accepted the call, which
    is not run again) and ``discard`` (it rejected it: rolled back, the call is blocked).
    """

    def fork(self, state: Any) -> Any: ...

    def discard(self, forked: Any) -> None: ...


class State:
    """``Annotated[T, tg.State]`` on a parameter of a function tool: the guard passes its
    ``state`` there (the fork of it during a dry run). The parameter is hidden from the
    tool's schema; the model never sees or sends it. A direct call may pass it by keyword."""


def is_in_place(strategy: ForkStrategy) -> bool:
    return getattr(strategy, "in_place", False) is True


def is_transactional(strategy: ForkStrategy) -> bool:
    """In place and able to keep what the call did: the dry run is the call itself."""
    return is_in_place(strategy) and callable(getattr(strategy, "keep", None))


class DeepCopyFork:
    """``copy.deepcopy`` of the state; discarding drops the copy. The default where the state
    is a plain Python value (dicts, lists, dataclasses, pydantic models, objects holding them).
    A state holding something that cannot be copied (a lock, a socket, a live connection)
    makes the fork fail: the guard's ``on_guard_error`` policy then decides."""

    in_place: Final = False

    def fork(self, state: Any) -> Any:
        return copy.deepcopy(state)

    def discard(self, forked: Any) -> None:
        return None

    def __repr__(self) -> str:
        return "DeepCopyFork()"


class CallbackFork:
    """A user-supplied pair: ``fork(state) -> forked`` and ``discard(forked)`` (optional).

    ``in_place=True`` when ``fork`` isolates changes without returning a new object (it opens
    a transaction, takes a snapshot...): the tool then runs unchanged on the real objects.
    Otherwise ``fork`` must return a new object, never ``state`` itself: a fork that returns
    the state is a guard error, not a dry run on the real state. ``keep`` (in place only)
    commits what the call did: the dry run is then the call itself (see the module).
    """

    def __init__(
        self,
        fork: Callable[[Any], Any],
        discard: Callable[[Any], Any] | None = None,
        *,
        in_place: bool = False,
        keep: Callable[[Any], Any] | None = None,
    ) -> None:
        for name, value in (("fork", fork), ("discard", discard), ("keep", keep)):
            if not callable(value) and (value is not None or name == "fork"):
                raise ToolDefinitionError(f"CallbackFork: {name} must be callable, not {value!r}")
        if keep is not None and not in_place:
            raise ToolDefinitionError(
                "CallbackFork: keep commits a call run on the real state, so it needs "
                "in_place=True (a copying fork has nothing to keep)"
            )
        self._fork = fork
        self._discard = discard
        self.in_place = bool(in_place)
        if keep is not None:
            self.keep = keep

    def fork(self, state: Any) -> Any:
        return self._fork(state)

    def discard(self, forked: Any) -> None:
        if self._discard is not None:
            self._discard(forked)

    def __repr__(self) -> str:
        name = getattr(self._fork, "__qualname__", type(self._fork).__name__)
        keeps = ", keep=..." if is_transactional(self) else ""
        return f"CallbackFork({name}, in_place={self.in_place}{keeps})"


class _Savepoint:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


# One name for every savepoint: sqlite3 caches statements by their text (128 by default), so a
# fresh name per dry run would evict the application's own. SQLite allows the same name
# nested: ROLLBACK TO and RELEASE act on the most recent one, and forks are discarded in
# the reverse order of their creation.
_SAVEPOINT = "toolguard_dry_run"

# sqlite3's authorizer action code for BEGIN, COMMIT and ROLLBACK statements (not SAVEPOINT).
_SQLITE_TRANSACTION: Final = sqlite3.SQLITE_TRANSACTION


class SQLiteSavepointFork:
    """A real SQLite database, forked in place: ``SAVEPOINT`` before the dry run,
    ``ROLLBACK TO`` and ``RELEASE`` after it. The tool runs unchanged on ``connection``.

    While the dry run runs, statements that would end the transaction (``COMMIT``,
    ``ROLLBACK``, ``BEGIN``, and ``connection.commit()``) are turned into no-ops with an
    authorizer, so a tool that commits its own writes cannot commit the dry run's. A
    connection with an authorizer of its own must pass it as ``authorizer``: SQLite keeps one
    per connection, so the fork chains it during the dry run and puts it back after.
    ``guard_transactions=False`` leaves the authorizer alone; a tool that then ends the
    transaction during the dry run makes ``discard`` raise :class:`ForkError` (its writes may
    be committed by then).

    Transactional: an accepted call is kept with ``RELEASE`` (its writes join the enclosing
    transaction, or are committed when the savepoint opened it), and the last ``COMMIT`` or
    ``ROLLBACK`` the tool asked for during its run is then carried out, as it would have
    been without the dry run.

    One dry run at a time per connection: the savepoint covers every write made on the
    connection while it is open, also another task's real call.
    """

    in_place: Final = True

    def __init__(
        self,
        connection: sqlite3.Connection,
        *,
        authorizer: Callable[[int, str | None, str | None, str | None, str | None], int]
        | None = None,
        guard_transactions: bool = True,
    ) -> None:
        if not isinstance(connection, sqlite3.Connection):
            raise ToolDefinitionError(
                f"SQLiteSavepointFork needs a sqlite3.Connection, not {type(connection).__name__}"
            )
        self.connection = connection
        self.authorizer = authorizer
        self.guard_transactions = guard_transactions
        self._ignored: str | None = None  # the last transaction statement made a no-op

    def fork(self, state: Any) -> _Savepoint:
        savepoint = _Savepoint(_SAVEPOINT)
        self.connection.execute(f'SAVEPOINT "{savepoint.name}"')
        if self.guard_transactions:
            self._ignored = None
            self.connection.set_authorizer(self._authorize)
        return savepoint

    def keep(self, forked: _Savepoint) -> None:
        """The call stands: ``RELEASE``, then the tool's own last COMMIT or ROLLBACK. With
        ``guard_transactions=False`` a tool that ended the savepoint itself (its COMMIT) has
        already kept what it did."""
        connection = self.connection
        asked = self._ignored
        self._reset_authorizer()
        try:
            if not connection.in_transaction:
                raise sqlite3.OperationalError("no such savepoint: no transaction is open")
            connection.execute(f'RELEASE "{forked.name}"')
        except sqlite3.OperationalError as exc:
            if not self.guard_transactions and "no such savepoint" in str(exc):
                return
            raise ForkError(
                f"savepoint {forked.name} could not be released ({exc}): the call ended the "
                "transaction itself"
            ) from exc
        if asked == "COMMIT":
            connection.commit()
        elif asked == "ROLLBACK":
            connection.rollback()

    def discard(self, forked: _Savepoint) -> None:
        connection = self.connection
        self._reset_authorizer()
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

    def _reset_authorizer(self) -> None:
        connection = self.connection
        if self.guard_transactions:
            # Installing an authorizer expires every prepared statement (removing one does
            # not), so a COMMIT compiled as a no-op during the dry run and kept in sqlite3's
            # statement cache is compiled again, for real, when next used. Without such a
            # statement, every statement compiled as it would have anyway: none to expire.
            if self.authorizer is not None or self._ignored:
                connection.set_authorizer(self.authorizer or _allow_all)
            if self.authorizer is None:
                connection.set_authorizer(None)

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        if action == _SQLITE_TRANSACTION:
            self._ignored = arg1 or "BEGIN"
            return sqlite3.SQLITE_IGNORE  # the statement compiles to nothing
        if self.authorizer is not None:
            return self.authorizer(action, arg1, arg2, db, source)
        return sqlite3.SQLITE_OK

    def __repr__(self) -> str:
        return f"SQLiteSavepointFork({self.connection!r})"


class UndoLogFork:
    """The state's own objects, journaled: the call runs on them once, inside an undo log
    that records, lazily, only what the call reaches (undolog.py). Accepted, its effects
    stay; rejected, they are rolled back in place. For plain Python state (objects with a
    ``__dict__``, dicts, lists, sets, ``random.Random``), where a copy of the whole state
    costs far more than the call.

    The state is the method's instance or the tool's ``tg.State`` argument; what the call
    changes outside it (a module global, a file) is not journaled. One dry run at a time per
    state: another thread using the same objects meanwhile sees them mid-transaction.
    """

    in_place: Final = True

    def fork(self, state: Any) -> Journal:
        journal = Journal()
        if not journal.track(state):
            raise ForkError(
                f"an undo log has nothing to track in {type(state).__name__!r}: it needs the "
                "tool's state, a method's instance or a tg.State parameter"
            )
        return journal

    def keep(self, forked: Journal) -> None:
        forked.keep()

    def discard(self, forked: Journal) -> None:
        forked.rollback()

    def __repr__(self) -> str:
        return "UndoLogFork()"


def _allow_all(*_: Any) -> int:
    return sqlite3.SQLITE_OK


def resolve(option: Any, where: str) -> ForkStrategy | bool | None:
    """A ``dry_run=`` option checked: None (inherit), True, False or a strategy."""
    if option is None or isinstance(option, bool):
        return option
    if isinstance(option, ForkStrategy):
        return option
    raise ToolDefinitionError(
        f"{where}: dry_run must be None, True, False or a fork strategy (an object with "
        f"fork(state) and discard(forked), e.g. tg.DeepCopyFork()), not {option!r}"
    )
