"""A SQLite dry run follows the tool's own BEGIN, COMMIT, ROLLBACK, savepoints and
executescript (toolguard/runtime/fork_sqlite.py): kept, the database is what a plain run of
the tool leaves; rejected or refused, exactly what it was before the call.

Every comparison is against a plain run of the same tool on an identical fresh database
file, seen both through the tool's own connection and through a second one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolguard as tg

Op = tuple[str, str]


def make_db(path: Path, isolation: str | None) -> sqlite3.Connection:
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode = WAL")  # readers never wait (BEGIN EXCLUSIVE left open)
    setup.executescript(
        "CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO t VALUES (1, 1);"
    )
    setup.close()
    return sqlite3.connect(path, isolation_level=isolation, timeout=0.05)


def rows(conn: sqlite3.Connection) -> list[tuple[int, int]]:
    return [tuple(r) for r in conn.execute("SELECT k, v FROM t ORDER BY k")]


def committed(path: Path) -> list[tuple[int, int]]:
    other = sqlite3.connect(path, timeout=0.05)
    try:
        return rows(other)
    finally:
        other.close()


def run_op(conn: sqlite3.Connection, op: Op, log: list[Any]) -> None:
    kind, arg = op
    try:
        if kind == "sql":
            conn.execute(arg)
        elif kind == "script":
            conn.executescript(arg)
        elif kind == "commit":
            conn.commit()
        elif kind == "rollback":
            conn.rollback()
        elif kind == "read":
            log.append(rows(conn))
    except sqlite3.Error as exc:
        log.append(f"{type(exc).__name__}: {exc}")


def tool_for(conn: sqlite3.Connection, ops: list[Op], end: str) -> Callable[[], Any]:
    def tool() -> Any:
        log: list[Any] = []
        for op in ops:
            run_op(conn, op, log)
        if end == "raise":
            raise ValueError("rejected at the end")
        if end == "error":
            return {"error": "rejected at the end"}
        return log

    return tool


OPS: st.SearchStrategy[Op] = st.sampled_from(
    [
        ("sql", "INSERT INTO t (v) VALUES (10)"),
        ("sql", "UPDATE t SET v = v + 1"),
        ("sql", "DELETE FROM t WHERE k = 1"),
        ("sql", "BEGIN"),
        ("sql", "BEGIN IMMEDIATE"),
        ("sql", "BEGIN EXCLUSIVE"),
        # Not the bare texts "COMMIT" and "ROLLBACK": the fork cannot tell them from
        # conn.commit() and conn.rollback(), which do nothing without a transaction.
        ("sql", "COMMIT TRANSACTION"),
        ("sql", "END"),
        ("sql", "ROLLBACK TRANSACTION"),
        ("sql", "SAVEPOINT a"),
        ("sql", "SAVEPOINT b"),
        ("sql", "RELEASE a"),
        ("sql", "RELEASE SAVEPOINT b"),
        ("sql", "ROLLBACK TO a"),
        ("sql", "ROLLBACK TRANSACTION TO SAVEPOINT b"),
        ("commit", ""),
        ("rollback", ""),
        ("read", ""),
        ("script", "INSERT INTO t (v) VALUES (20);"),
        ("script", "BEGIN; INSERT INTO t (v) VALUES (30); COMMIT;"),
        ("script", "BEGIN; UPDATE t SET v = 0; ROLLBACK;"),
        ("script", "SAVEPOINT s; INSERT INTO t (v) VALUES (40); RELEASE s;"),
    ]
)


def compare(tmp: Path, ops: list[Op], end: str, app_txn: bool, isolation: str | None) -> str:
    """The dry run of one tool against its plain run; what happened to the call."""
    plain_path, dry_path = tmp / "plain.db", tmp / "dry.db"
    for p in (plain_path, dry_path):
        p.unlink(missing_ok=True)
    plain, dry = make_db(plain_path, isolation), make_db(dry_path, isolation)
    try:
        for conn in (plain, dry):
            if app_txn:  # the application's own open transaction, with a write in it
                conn.execute("BEGIN")
                conn.execute("INSERT INTO t (v) VALUES (99)")
        before = (rows(dry), committed(dry_path), dry.in_transaction)
        try:
            expected: Any = tool_for(plain, ops, end)()
        except ValueError:
            expected = None
        guard = tg.Guard(
            dry_run=tg.SQLiteSavepointFork(dry),
            error_result=lambda r: isinstance(r, dict) and "error" in r,
        )
        guard.tool(tool_for(dry, ops, end), name="tool")
        out = guard.call("tool", {})
        after = (rows(dry), committed(dry_path), dry.in_transaction)
        if isinstance(out, tg.Rejection):
            assert after == before, (out.message, ops)
            refused = "ForkError" in out.message
            assert refused or end != "ok", (out.message, ops)
            return "refused" if refused else "rejected"
        assert end == "ok" and out == expected, ops
        assert after == (rows(plain), committed(plain_path), plain.in_transaction), ops
        return "kept"
    finally:
        plain.close()
        dry.close()


@pytest.mark.slow
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(OPS, max_size=7),
    end=st.sampled_from(["ok", "ok", "raise", "error"]),
    app_txn=st.booleans(),
    isolation=st.sampled_from(["", None]),
)
def test_a_dry_run_equals_a_plain_run_or_leaves_the_database_as_it_was(
    tmp_path: Path, ops: list[Op], end: str, app_txn: bool, isolation: str | None
) -> None:
    compare(tmp_path, ops, end, app_txn, isolation)


# -- the sequences the property covers, one by one ------------------------------------------


@pytest.mark.parametrize("app_txn", [False, True])
def test_write_rollback_write_commit_keeps_only_the_second_write(
    tmp_path: Path, app_txn: bool
) -> None:
    """The issue's case: the ROLLBACK is followed by more statements, which a held-back
    ROLLBACK would show the undone write. Either reproduced exactly or refused."""
    ops: list[Op] = [
        ("sql", "INSERT INTO t (v) VALUES (10)"),
        ("rollback", ""),
        ("sql", "INSERT INTO t (v) VALUES (20)"),
        ("commit", ""),
    ]
    assert compare(tmp_path, ops, "ok", app_txn, "") in ("kept", "refused")
    assert committed(tmp_path / "dry.db") == [(1, 1)]  # never the undone write


@pytest.mark.parametrize(
    "ops",
    [
        [("sql", "INSERT INTO t (v) VALUES (10)"), ("commit", "")],
        [("sql", "INSERT INTO t (v) VALUES (10)"), ("commit", ""), ("commit", "")],
        [("sql", "INSERT INTO t (v) VALUES (10)"), ("sql", "COMMIT"), ("read", "")],
        [("sql", "UPDATE t SET v = 5"), ("rollback", "")],
        [("sql", "BEGIN"), ("sql", "INSERT INTO t (v) VALUES (10)"), ("sql", "ROLLBACK")],
        [
            ("sql", "SAVEPOINT a"),
            ("sql", "UPDATE t SET v = 7"),
            ("sql", "ROLLBACK TO a"),
            ("sql", "RELEASE a"),
        ],
        [("sql", "SAVEPOINT a"), ("sql", "UPDATE t SET v = 7"), ("sql", "RELEASE a")],
        [("sql", "INSERT INTO t (v) VALUES (10)")],  # left uncommitted, as a plain run does
        [
            ("script", "INSERT INTO t (v) VALUES (20);"),
            ("sql", "UPDATE t SET v = 3"),
            ("commit", ""),
        ],
        [("sql", "UPDATE t SET v = 3"), ("script", "UPDATE t SET v = 4;")],
    ],
)
@pytest.mark.parametrize("app_txn", [False, True])
def test_common_sequences_are_kept_as_a_plain_run_leaves_them(
    tmp_path: Path, ops: list[Op], app_txn: bool
) -> None:
    # BEGIN inside the application's transaction raises in a plain run: refused.
    expected = "refused" if app_txn and ops[0] == ("sql", "BEGIN") else "kept"
    assert compare(tmp_path, ops, "ok", app_txn, "") == expected


def test_a_call_rejected_after_its_commit_is_rolled_back(tmp_path: Path) -> None:
    ops: list[Op] = [("sql", "INSERT INTO t (v) VALUES (10)"), ("commit", "")]
    assert compare(tmp_path, ops, "raise", False, "") == "rejected"
    assert compare(tmp_path, ops, "error", True, "") == "rejected"


@pytest.mark.parametrize(
    "ops",
    [
        [("sql", "UPDATE t SET v = 0"), ("sql", 'RELEASE "toolguard_dry_run"')],
        [("sql", "BEGIN"), ("sql", "BEGIN"), ("read", "")],  # a plain run raises there
        [("sql", "UPDATE t SET v = 0"), ("rollback", ""), ("read", "")],
        [
            ("sql", "UPDATE t SET v = 0"),
            ("commit", ""),
            ("sql", "UPDATE t SET v = 2"),
            ("rollback", ""),
        ],
        [("sql", "SAVEPOINT a"), ("sql", "UPDATE t SET v = 0")],  # left open
    ],
)
def test_what_cannot_be_reproduced_is_refused_and_rolled_back(
    tmp_path: Path, ops: list[Op]
) -> None:
    assert compare(tmp_path, ops, "ok", False, "") == "refused"


def test_a_refusal_names_the_statement(tmp_path: Path) -> None:
    conn = make_db(tmp_path / "one.db", "")
    guard = tg.Guard(dry_run=tg.SQLiteSavepointFork(conn))

    @guard.tool
    def retry() -> int:
        conn.execute("INSERT INTO t (v) VALUES (10)")
        conn.rollback()
        conn.execute("INSERT INTO t (v) VALUES (20)")
        conn.commit()
        return 1

    out = guard.call("retry", {})
    assert isinstance(out, tg.Rejection) and out.tool == "retry"
    assert "ForkError: 'INSERT INTO t" in out.message  # the statement, cut to fit
    assert committed(tmp_path / "one.db") == [(1, 1)] and not conn.in_transaction
    conn.close()


# -- other connections ----------------------------------------------------------------------


def test_a_tool_that_commits_then_writes_through_a_second_connection(tmp_path: Path) -> None:
    """The savepoint covers the fork's connection only: held back, the tool's COMMIT keeps
    the savepoint's lock, and a second connection's write cannot get it (a documented
    limit, docs/fork-and-plans.md). What the guard does guarantee: the call is blocked, not
    half run; the database is exactly as before; no lock is left behind. The busy timeout
    is short only so that the wait ends quickly; nothing here depends on how long it is."""
    path = tmp_path / "two.db"
    conn = make_db(path, "")
    guard = tg.Guard(dry_run=tg.SQLiteSavepointFork(conn))

    @guard.tool
    def transfer() -> str:
        conn.execute("UPDATE t SET v = 2")
        conn.commit()
        second = sqlite3.connect(path, timeout=0.05)
        try:
            second.execute("INSERT INTO t (v) VALUES (3)")
            second.commit()
        finally:
            second.close()
        return "done"

    out = guard.call("transfer", {})
    assert isinstance(out, tg.Rejection) and out.decision == "blocked"
    assert committed(path) == [(1, 1)] and rows(conn) == [(1, 1)]
    assert not conn.in_transaction
    probe = sqlite3.connect(path, timeout=0.05)
    probe.execute("INSERT INTO t (v) VALUES (4)")  # no lock left behind
    probe.commit()
    probe.close()
    conn.close()
