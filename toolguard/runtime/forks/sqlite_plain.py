"""The plain run that SQLiteSavepointFork follows (fork_sqlite.py): what a tool's statements
on the connection would have done without the dry run, statement by statement, and, for a
single call (``fork_call``), whether the COMMIT that commits the call's writes was carried
out for real and what ran after it (docs/fork-and-plans.md, "SQLite details").
"""

from __future__ import annotations

import re
import sqlite3
from typing import Final

# One name for every savepoint: sqlite3 caches statements by their text (128 by default), so a
# fresh name per dry run would evict the application's own. SQLite allows the same name
# nested: ROLLBACK TO and RELEASE act on the most recent one, and forks are discarded in
# the reverse order of their creation.
SAVEPOINT: Final = "toolguard_dry_run"

_TOKEN = re.compile(r'"(?:[^"]|"")*"|\[[^\]]*\]|`(?:[^`]|``)*`|\'(?:[^\']|\'\')*\'|\w+|\S')
_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.S)
# Python's sqlite3 (3.11, isolation_level not None) opens a transaction before these only.
_DML: Final = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})
_TRANSACTION_WORDS: Final = frozenset(
    {"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"}
)
# Writes that total_changes does not count.
_SCHEMA: Final = frozenset({"CREATE", "DROP", "ALTER", "REINDEX", "ANALYZE"})
# Statements SQLite refuses, or treats differently, inside a transaction.
_OUTSIDE_ONLY: Final = frozenset({"ATTACH", "DETACH", "VACUUM"})


def _words(sql: str) -> list[str]:
    return _TOKEN.findall(_LEADING.sub("", sql, count=1).rstrip().rstrip(";"))


def _name(token: str) -> str:
    """A savepoint name as SQLite compares it: unquoted, case-insensitive."""
    if token[:1] in "\"`'[" and len(token) > 1:
        token = token[1:-1].replace(token[0] * 2, token[0]) if token[0] != "[" else token[1:-1]
    return token.lower()


class Shadow:
    """The plain run of what the tool executes on the connection, followed statement by
    statement: whether its transaction is open, which of its writes it committed, rolled
    back or left uncommitted, and its own savepoints. ``refusal`` says why it could not be
    followed exactly.

    A *segment* is the stretch of one plain-run transaction inside the call. The dry run
    can undo all of the call's writes (ROLLBACK TO the savepoint) or none of them, so it is
    exact when every segment that wrote has the same fate.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.autobegin = connection.isolation_level is not None
        self.before = connection.in_transaction  # the application's transaction, if any
        self.open = self.before
        self.app = self.before  # the open segment is the application's transaction
        self.app_fate: str | None = None
        self.dirty = False
        # The call ran a statement inside the savepoint, so the savepoint holds its snapshot
        # (a read's too): a COMMIT must end it where a plain run's does, or a write another
        # connection makes after that COMMIT leaves this one's next write locked out.
        self.touched = False
        self.fates: set[str] = set()
        self.begin = "BEGIN"  # what opened the open segment, replayed when it is left empty
        self.stack: list[tuple[str, bool]] = []  # (name, whether it opened the transaction)
        self.undone = False  # a held-back ROLLBACK undid writes: later statements diverge
        self.refusal: str | None = None
        self.changes = connection.total_changes
        # One call (fork_call): its COMMIT is carried out where it commits the call's writes.
        self.single = False
        self.committing: str | None = None  # such a COMMIT is running
        self.released: str | None = None  # it ended the savepoint: from then on, a plain run
        self.diverged: str | None = None  # why the call did not run as a plain run after it
        self.noops: set[str] = set()  # transaction statements compiled to nothing

    def may_release(self) -> bool:
        """Whether a COMMIT compiled now is carried out: one call, no transaction of the
        application (the COMMIT is the call's), and every write of the call is one that a
        plain run commits there or already has. Holding a COMMIT back that commits nothing
        is invisible, and keeps the rest of the call undoable."""
        self.absorb()
        return (
            self.single
            and self.released is None
            and self.committing is None
            and not self.before
            and self.refusal is None
            and not self.undone
            and (self.dirty or bool(self.fates) or self.touched)
        )

    def look(self) -> None:
        """After a COMMIT carried out: it ended the savepoint, or it failed (the plain run's
        would too) and the savepoint, still open, can undo the call."""
        if self.committing is not None:
            sql, self.committing = self.committing, None
            if self.connection.in_transaction:
                self.refuse(sql, "failed, which the shadow of a plain run took for a commit")
            else:
                self.released = sql

    def refuse(self, sql: str, why: str) -> None:
        if self.refusal is None:
            self.refusal = f"{sql.strip()} {why}"  # the statement first: messages are cut

    def absorb(self) -> None:
        """Rows written since the last look belong to the segment they were written in."""
        total = self.connection.total_changes
        if total != self.changes:
            self.changes = total
            self._wrote()

    def _wrote(self) -> None:
        if self.open:
            self.dirty = True
        else:
            self.fates.add("commit")  # no transaction: a plain run committed it at once

    def _start(self, begin: str) -> None:
        self.open, self.app, self.dirty, self.begin = True, False, False, begin

    def _end(self, fate: str) -> None:
        if self.app:
            self.app_fate = fate
            self.undone |= fate == "rollback"  # the application's writes are assumed
        if self.dirty:
            self.fates.add(fate)
            self.undone |= fate == "rollback"
        self.open = self.app = self.dirty = False
        self.stack.clear()

    def find(self, name: str) -> int | None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == name:
                return i
        return None

    def statement(self, sql: str, compiled: int | None = None) -> None:
        """``compiled``: the authorizer's verdict on this transaction statement if it was
        compiled just now, None if it came from sqlite3's statement cache (or is none)."""
        self.look()
        if self.released is not None:
            self._after_release(sql, compiled)
            return
        if compiled == sqlite3.SQLITE_IGNORE:
            self.noops.add(sql)
        words = _words(sql)
        if words and words[0].upper() not in _TRANSACTION_WORDS:
            self.touched = True
        refusal = self.refusal
        self._follow(sql)
        if compiled == sqlite3.SQLITE_OK:  # the COMMIT may_release allowed
            self.committing = sql
            if self.refusal is not refusal:  # e.g. a plain run raises, with none open
                self.diverged = self.refusal

    def _after_release(self, sql: str, compiled: int | None) -> None:
        words = [w.upper() for w in _words(sql)]
        if not words or words[0] not in ("BEGIN", "COMMIT", "END", "ROLLBACK") or "TO" in words:
            return
        if compiled == sqlite3.SQLITE_OK:
            self.noops.discard(sql)  # compiled again, for real (and cached so)
        elif compiled is None and sql in self.noops and self.diverged is None:
            self.diverged = (
                f"{sql.strip()} ran as compiled before the COMMIT, as a no-op (from sqlite3's "
                "statement cache), where a plain run carries it out"
            )

    def _follow(self, sql: str) -> None:
        self.absorb()
        if self.refusal is not None:
            return
        if self.undone:
            self.refuse(
                sql,
                "runs after a ROLLBACK that undid writes, which the dry run "
                "holds back until the call ends",
            )
            return
        words = _words(sql)
        first = words[0].upper() if words else ""
        if first == "BEGIN":
            if self.open:
                self.refuse(sql, "starts a transaction inside one (a plain run raises)")
            else:
                self._start(" ".join(words))
        elif first in ("COMMIT", "END", "ROLLBACK") and "TO" not in map(str.upper, words):
            if self.open:
                self._end("rollback" if first == "ROLLBACK" else "commit")
            elif words not in (["COMMIT"], ["ROLLBACK"]):
                # conn.commit(), conn.rollback() and executescript's COMMIT (these exact
                # texts) do nothing without a transaction; a statement of the tool raises.
                self.refuse(sql, "ends a transaction where a plain run has none open")
        elif first in ("SAVEPOINT", "RELEASE", "ROLLBACK"):
            self._savepoint(sql, first, words)
        else:
            self._other(sql, first, words)

    def _savepoint(self, sql: str, first: str, words: list[str]) -> None:
        name = _name(words[-1]) if len(words) >= 2 else ""
        if first == "SAVEPOINT":
            opens = not self.open  # outside a transaction, SAVEPOINT opens one
            if opens:
                self._start("BEGIN")
            self.stack.append((name, opens))
            return
        at = self.find(name)
        if at is None:
            self.refuse(sql, "names a savepoint the call did not open")
        elif first == "ROLLBACK":
            del self.stack[at + 1 :]  # ROLLBACK TO keeps the savepoint itself
        else:
            opened = self.stack[at][1]
            del self.stack[at:]
            if opened:
                self._end("commit")  # releasing the outermost savepoint commits

    def _other(self, sql: str, first: str, words: list[str]) -> None:
        if not self.open:
            if first in _OUTSIDE_ONLY or (first == "PRAGMA" and "=" in words):
                self.refuse(sql, "behaves otherwise inside the dry run's transaction")
                return
            if self.autobegin and first in _DML and not sql.rstrip().endswith(";"):
                # sqlite3's implicit BEGIN in a plain run. executescript opens none, and
                # its statements (but a script's last) are traced with their semicolon.
                self._start("BEGIN")
        if first in _SCHEMA or (first == "PRAGMA" and "=" in words):
            self._wrote()

    def ending(self) -> list[str] | str:
        """What reproduces the plain run once the call is kept, or why nothing does."""
        if self.stack:
            return f"SAVEPOINT {self.stack[-1][0]} is left open by the call"
        fates = set(self.fates)
        if self.open and self.dirty and not self.app:
            fates.add("open")
        if len(fates) > 1:
            return "the call commits, rolls back or leaves uncommitted different writes"
        fate = next(iter(fates), "commit")  # nothing written: every ending is exact
        release = [f'RELEASE "{SAVEPOINT}"']
        undo = [f'ROLLBACK TO "{SAVEPOINT}"', *release]
        if self.before and self.app_fate is None:
            return release  # the application's transaction goes on, with the call's writes
        if self.before and self.app_fate == "rollback":
            return ["ROLLBACK"]  # a plain ROLLBACK undoes the application's writes too
        if fate == "open":
            if self.before:
                return (
                    "the call commits the application's transaction, then leaves writes uncommitted"
                )
            return []  # the savepoint stays open as the transaction the tool left open
        steps = undo if fate == "rollback" else release
        if self.before:
            steps = [*steps, "COMMIT"]  # the tool committed the application's transaction
        return [*steps, self.begin] if self.open else steps
