"""A SQLite dry run follows the tool's own BEGIN, COMMIT, ROLLBACK, savepoints and
executescript (toolguard/runtime/forks/sqlite.py): kept, the database is what a plain run of
the tool leaves; rejected or refused, exactly what it was before the call.

Every comparison is against a plain run of the same tool on an identical fresh database
file, seen both through the tool's own connection and through a second one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import toolguard as tg

Op = tuple[str, str]


def make_db(path: Path, isolation: str | None) -> sqlite3.Connection:
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode = WAL")  # readers never wait (BEGIN EXCLUSIVE left open)
    setup.executescript(
        "CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO t VALUES (1, 1);"
        "CREATE TABLE u (v INTEGER);"
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


def other_rows(path: Path) -> list[tuple[int]]:
    """Table u, which only second connections write to."""
    other = sqlite3.connect(path, timeout=0.05)
    try:
        return [tuple(r) for r in other.execute("SELECT v FROM u ORDER BY rowid")]
    finally:
        other.close()


def write_elsewhere(path: Path, sql: str) -> None:
    """A write through a second connection that never waits: timeout=0 fails at once on a
    lock, so a lock held by the dry run shows as an error, not as a wait."""
    second = sqlite3.connect(path, timeout=0)
    try:
        second.execute(sql)
        second.commit()
    finally:
        second.close()


def run_op(conn: sqlite3.Connection, op: Op, log: list[Any], path: Path) -> None:
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
        elif kind == "commit, then elsewhere":
            conn.commit()
            write_elsewhere(path, arg)
            log.append("written elsewhere")
    except sqlite3.Error as exc:
        log.append(f"{type(exc).__name__}: {exc}")


def tool_for(conn: sqlite3.Connection, ops: list[Op], end: str, path: Path) -> Callable[[], Any]:
    def tool() -> Any:
        log: list[Any] = []
        for op in ops:
            run_op(conn, op, log, path)
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
# The tool commits, then writes through a second connection (to table u: the lock is the
# database's). Meaningful without a transaction of the application only: with one, the
# COMMIT is the application's and stays held back (docs/fork-and-plans.md).
ELSEWHERE: Op = ("commit, then elsewhere", "INSERT INTO u VALUES (50)")


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
            expected: Any = tool_for(plain, ops, end, plain_path)()
        except ValueError:
            expected = None
        guard = tg.Guard(
            dry_run=tg.SQLiteSavepointFork(dry),
            error_result=lambda r: isinstance(r, dict) and "error" in r,
        )
        guard.tool(tool_for(dry, ops, end, dry_path), name="tool")
        out = guard.call("tool", {})
        after = (rows(dry), committed(dry_path), dry.in_transaction)
        if isinstance(out, tg.Rejection):
            refused = "ForkError" in out.message
            assert refused or end != "ok", (out.message, ops)
            if STANDS in out.message:  # a single call's COMMIT was carried out: it stands
                assert not app_txn and after[0] == after[1] and not after[2], ops
                if DIVERGED not in out.message:  # else a plain run would not have come here
                    assert after[1] == committed(plain_path), (out.message, ops)
                    assert other_rows(dry_path) == other_rows(plain_path), ops
                return "committed"
            assert after == before, (out.message, ops)
            return "refused" if refused else "rejected"
        assert end == "ok" and out == expected, (out, expected, ops)
        assert after == (rows(plain), committed(plain_path), plain.in_transaction), ops
        assert other_rows(dry_path) == other_rows(plain_path), ops
        return "kept"
    finally:
        plain.close()
        dry.close()


STANDS = "commit stands"  # a guard error after a COMMIT carried out: what it committed stays
DIVERGED = "run diverged"  # after it, the call did not run as a plain run


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


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(st.one_of(OPS, st.just(ELSEWHERE)), max_size=7),
    end=st.sampled_from(["ok", "ok", "raise", "error"]),
    isolation=st.sampled_from(["", None]),
)
# Found by hypothesis: a COMMIT after a read only was held back, so the savepoint kept the
# read's snapshot and the tool's next write was locked out by the second connection's.
@example(
    ops=[("read", ""), ELSEWHERE, ("sql", "INSERT INTO t (v) VALUES (10)")],
    end="ok",
    isolation="",
)
def test_a_write_through_a_second_connection_after_a_commit_is_a_plain_runs(
    tmp_path: Path, ops: list[Op], end: str, isolation: str | None
) -> None:
    """Kept, the second connection's write succeeded or failed exactly as in a plain run
    (the tool's log says which): never on the dry run's lock."""
    compare(tmp_path, ops, end, False, isolation)


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


def test_a_call_rejected_after_committing_the_applications_transaction_is_rolled_back(
    tmp_path: Path,
) -> None:
    """That COMMIT is the application's: it stays held back, so a rejection undoes it all."""
    ops: list[Op] = [("sql", "INSERT INTO t (v) VALUES (10)"), ("commit", "")]
    assert compare(tmp_path, ops, "error", True, "") == "rejected"
    assert compare(tmp_path, ops, "raise", True, None) == "rejected"


@pytest.mark.parametrize("end", ["raise", "error"])
@pytest.mark.parametrize("isolation", ["", None])
def test_a_call_rejected_after_its_own_commit_is_a_guard_error_and_the_commit_stands(
    tmp_path: Path, end: str, isolation: str | None
) -> None:
    """A single call's COMMIT was carried out, as in a plain run: it cannot be undone, and
    the dry run says so (what a plain run committed stands, what it left open is undone)."""
    ops: list[Op] = [
        ("sql", "BEGIN"),
        ("sql", "INSERT INTO t (v) VALUES (10)"),
        ("commit", ""),
        ("sql", "BEGIN DEFERRED"),  # not the text above: see the next test
        ("sql", "UPDATE t SET v = 7"),
    ]
    assert compare(tmp_path, ops, end, False, isolation) == "committed"
    assert committed(tmp_path / "dry.db") == [(1, 1), (2, 10)]  # without the UPDATE


@pytest.mark.parametrize("policy", ["fail_closed", "fail_open"])
def test_a_no_op_run_again_from_the_statement_cache_after_the_commit_is_a_guard_error(
    tmp_path: Path, policy: Literal["fail_closed", "fail_open"]
) -> None:
    """The first BEGIN was compiled to nothing, and sqlite3 runs that compiled statement
    again after the COMMIT: the INSERT then commits at once (isolation_level=None), where a
    plain run opens a transaction, and the second COMMIT raises. The dry run says so; what
    stands is never undone nor run again."""
    path = tmp_path / "cache.db"
    conn = make_db(path, None)
    guard = tg.Guard(dry_run=tg.SQLiteSavepointFork(conn), on_guard_error=policy)

    @guard.tool
    def twice() -> str:
        for v in (10, 20):
            conn.execute("BEGIN")
            conn.execute("INSERT INTO t (v) VALUES (?)", (v,))
            conn.execute("COMMIT")
        return "done"

    out = guard.call("twice", {})
    assert isinstance(out, tg.Rejection) and out.check == "state.dry_run"
    if policy == "fail_closed":  # failing open, the guard error is logged, not shown
        assert "ForkError" in out.message and STANDS in out.message and DIVERGED in out.message
    assert committed(path) == rows(conn) == [(1, 1), (2, 10), (3, 20)]  # ran once, not twice
    assert not conn.in_transaction
    conn.close()


def test_a_commit_then_a_rolled_back_write_is_kept_as_a_plain_run_leaves_it(
    tmp_path: Path,
) -> None:
    """Refused while the COMMIT was held back (writes committed and rolled back in one call);
    carried out, the rest of the call runs plainly. The application's COMMIT is held back."""
    ops: list[Op] = [
        ("sql", "UPDATE t SET v = 0"),
        ("commit", ""),
        ("sql", "UPDATE t SET v = 2"),
        ("rollback", ""),
    ]
    assert compare(tmp_path, ops, "ok", False, "") == "kept"
    assert committed(tmp_path / "dry.db") == [(1, 0)]
    assert compare(tmp_path, ops, "ok", True, "") == "refused"


@pytest.mark.parametrize(
    "ops",
    [
        [("sql", "UPDATE t SET v = 0"), ("sql", 'RELEASE "toolguard_dry_run"')],
        [("sql", "BEGIN"), ("sql", "BEGIN"), ("read", "")],  # a plain run raises there
        [("sql", "UPDATE t SET v = 0"), ("rollback", ""), ("read", "")],
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


def transfer_tool(conn: sqlite3.Connection, path: Path, fail: bool = False) -> Callable[[], str]:
    def transfer() -> str:
        conn.execute("UPDATE t SET v = 2")
        conn.commit()
        write_elsewhere(path, "INSERT INTO t (v) VALUES (3)")  # never waits: timeout=0
        conn.execute("INSERT INTO t (v) VALUES (4)")  # sqlite3's implicit BEGIN: left open
        if fail:
            raise ValueError("rejected after committing")
        conn.commit()
        return "done"

    return transfer


@pytest.mark.parametrize("isolation", ["", None])
def test_a_tool_that_commits_then_writes_through_a_second_connection(
    tmp_path: Path, isolation: str | None
) -> None:
    """The savepoint covers the fork's connection only. A single call's dry run carries out
    the tool's COMMIT as a plain run does (it commits the savepoint's writes and frees its
    lock), so a second connection's write goes through at once and the call is kept."""
    path = tmp_path / "two.db"
    conn = make_db(path, isolation)
    guard = tg.Guard(dry_run=tg.SQLiteSavepointFork(conn))
    if isolation is None:  # the explicit BEGIN, compiled to a no-op, then the real COMMIT

        @guard.tool
        def transfer() -> str:
            conn.execute("BEGIN")
            conn.execute("UPDATE t SET v = 2")
            conn.execute("COMMIT")
            write_elsewhere(path, "INSERT INTO t (v) VALUES (3)")
            conn.execute("INSERT INTO t (v) VALUES (4)")  # autocommit, as in a plain run
            return "done"

    else:
        guard.tool(transfer_tool(conn, path), name="transfer")
    assert guard.call("transfer", {}) == "done"
    assert committed(path) == [(1, 2), (2, 3), (3, 4)]  # seen from a third connection
    assert rows(conn) == committed(path) and not conn.in_transaction
    conn.close()


def test_a_tool_rejected_after_it_committed_and_wrote_elsewhere_says_what_stands(
    tmp_path: Path,
) -> None:
    path = tmp_path / "two.db"
    conn = make_db(path, "")
    guard = tg.Guard(dry_run=tg.SQLiteSavepointFork(conn))
    guard.tool(transfer_tool(conn, path, fail=True), name="transfer")
    out = guard.call("transfer", {})
    assert isinstance(out, tg.Rejection) and out.decision == "blocked"
    assert out.check == "state.dry_run" and "the dry run's discard raised ForkError" in out.message
    assert STANDS in out.message
    # A plain run's state, less what it left uncommitted: the commit and the other write.
    assert committed(path) == rows(conn) == [(1, 2), (2, 3)] and not conn.in_transaction
    conn.close()


def test_a_plan_holds_a_steps_commit_back_and_leaves_the_database_unchanged(
    tmp_path: Path,
) -> None:
    """Plan verification runs every step on one savepoint: a step's COMMIT is never carried
    out (a later step could not be undone), so other connections see none of it."""
    path = tmp_path / "plan.db"
    conn = make_db(path, "")
    seen: list[list[tuple[int, int]]] = []
    guard = tg.Guard(dry_run=tg.SQLiteSavepointFork(conn))

    @guard.tool
    def bump(v: int) -> int:
        conn.execute("UPDATE t SET v = ?", (v,))
        conn.commit()
        seen.append(committed(path))
        return v

    assert guard.verify_plan([tg.PlanStep("bump", {"v": 5}), tg.PlanStep("bump", {"v": 6})]).ok
    assert seen == [[(1, 1)], [(1, 1)]]  # held back: a third connection saw neither commit
    assert committed(path) == rows(conn) == [(1, 1)] and not conn.in_transaction
    assert guard.call("bump", {"v": 7}) == 7 and seen[-1] == [(1, 7)]  # one call: carried out
    conn.close()
