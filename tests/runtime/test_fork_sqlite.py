"""Fork dry runs on a real SQLite database: SAVEPOINT before, ROLLBACK TO and RELEASE after.

The tools are plain functions on one ``sqlite3`` connection, unchanged: the savepoint is the
fork. What other connections see (a second connection to the same file) is the proof that the
dry run's writes were rolled back and the real call's kept.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import toolguard as tg

if TYPE_CHECKING:  # the root conftest's type; importing it at run time could find another conftest
    from conftest import Telemetry


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    """(the tools' connection, an observer's connection) to one database file."""
    path = tmp_path / "bank.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));
        CREATE TABLE audit (id INTEGER PRIMARY KEY, account TEXT, amount INTEGER);
        INSERT INTO accounts VALUES ('acc_1', 100), ('acc_2', 5);
        """
    )
    conn.commit()
    observer = sqlite3.connect(path)
    yield conn, observer
    observer.close()
    conn.close()


def balances(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT id, balance FROM accounts ORDER BY id").fetchall())


def audit_rows(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM audit").fetchone()[0])


def bank_guard(
    otel: Telemetry, conn: sqlite3.Connection, commit: str = "method", **fork_options: bool
) -> tg.Guard:
    guard = otel.guard(dry_run=tg.SQLiteSavepointFork(conn, **fork_options))

    @guard.tool
    def withdraw(account: str, amount: int) -> dict[str, int]:
        conn.execute("INSERT INTO audit (account, amount) VALUES (?, ?)", (account, -amount))
        cur = conn.execute(
            "UPDATE accounts SET balance = balance - ? WHERE id = ?", (amount, account)
        )
        if cur.rowcount == 0:
            return {"error": f"no account {account}"}  # type: ignore[dict-item]
        # Tools commit their own writes: the dry run must not let them.
        if commit == "method":
            conn.commit()
        elif commit == "statement":
            conn.execute("COMMIT")
        row = conn.execute("SELECT balance FROM accounts WHERE id = ?", (account,)).fetchone()
        return {"balance": row[0]}

    return guard


@pytest.mark.parametrize("commit", ["method", "statement"])
def test_dry_run_writes_are_rolled_back_and_the_real_calls_kept(
    otel: Telemetry, db: tuple[sqlite3.Connection, sqlite3.Connection], commit: str
) -> None:
    conn, observer = db
    guard = bank_guard(otel, conn, commit)
    with otel.trajectory("bank") as traj:
        ok = guard.call("withdraw", {"account": "acc_1", "amount": 30})
        overdraft = guard.call("withdraw", {"account": "acc_2", "amount": 50})
        missing = guard.call("withdraw", {"account": "acc_9", "amount": 1})
        again = guard.call("withdraw", {"account": "acc_1", "amount": 20})
    assert ok == {"balance": 70} and again == {"balance": 50}
    assert isinstance(overdraft, tg.Rejection) and overdraft.decision == "blocked"
    assert "IntegrityError: CHECK constraint failed" in str(overdraft)
    assert isinstance(missing, tg.Rejection) and "no account acc_9" in str(missing)
    # Another connection sees exactly the two real withdrawals: one audit row each.
    assert balances(observer) == {"acc_1": 50, "acc_2": 5}
    assert audit_rows(observer) == 2
    assert not conn.in_transaction
    assert (traj.length, traj.first_error_depth) == (4, 2)
    # The COMMIT compiled as a no-op during a dry run is compiled again for real after it.
    conn.execute("UPDATE accounts SET balance = 1 WHERE id = 'acc_2'")
    conn.execute("COMMIT") if commit == "statement" else conn.commit()
    assert balances(observer)["acc_2"] == 1


def test_a_rejected_call_leaves_the_database_unchanged(
    otel: Telemetry, db: tuple[sqlite3.Connection, sqlite3.Connection]
) -> None:
    conn, observer = db
    guard = bank_guard(otel, conn)
    before = conn.execute("SELECT * FROM accounts ORDER BY id").fetchall()
    out = guard.call("withdraw", {"account": "acc_2", "amount": 6})
    assert isinstance(out, tg.Rejection)
    assert conn.execute("SELECT * FROM accounts ORDER BY id").fetchall() == before
    assert audit_rows(conn) == 0 and audit_rows(observer) == 0
    assert not conn.in_transaction


def test_an_open_transaction_of_the_application_survives_the_dry_run(
    otel: Telemetry, db: tuple[sqlite3.Connection, sqlite3.Connection]
) -> None:
    conn, observer = db
    guard = bank_guard(otel, conn, commit="none")
    conn.execute("INSERT INTO audit (account, amount) VALUES ('app', 0)")  # uncommitted
    assert guard.call("withdraw", {"account": "acc_1", "amount": 10}) == {"balance": 90}
    assert conn.in_transaction
    conn.commit()
    assert audit_rows(observer) == 2  # the application's row and the real call's
    assert balances(observer)["acc_1"] == 90


def test_without_the_transaction_guard_a_commit_keeps_and_a_late_failure_is_caught(
    otel: Telemetry, db: tuple[sqlite3.Connection, sqlite3.Connection]
) -> None:
    """guard_transactions=False: a tool's own COMMIT ends the savepoint. An accepted call has
    then kept what it did; a call that commits and is rejected afterwards cannot be rolled
    back, and the discard says so (a guard error, failing closed) instead of pretending."""
    conn, observer = db
    guard = bank_guard(otel, conn, guard_transactions=False)
    assert guard.call("withdraw", {"account": "acc_1", "amount": 1}) == {"balance": 99}
    assert balances(observer)["acc_1"] == 99 and audit_rows(observer) == 1

    @guard.tool
    def commit_then_fail(account: str) -> None:
        conn.execute("UPDATE accounts SET balance = 0 WHERE id = ?", (account,))
        conn.commit()
        raise ValueError("failed after committing")

    out = guard.call("commit_then_fail", {"account": "acc_2"})
    assert isinstance(out, tg.Rejection) and out.check == "state.dry_run"
    assert "the dry run's discard raised ForkError" in out.message
    assert "may have been committed" in out.message
    assert balances(observer)["acc_2"] == 0  # what the guard could not undo, as it says


def test_the_application_authorizer_is_chained_and_put_back(
    otel: Telemetry, db: tuple[sqlite3.Connection, sqlite3.Connection]
) -> None:
    conn, _ = db
    seen: list[int] = []

    def authorizer(action: int, *_: object) -> int:
        seen.append(action)
        return sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_DROP_TABLE else sqlite3.SQLITE_OK

    conn.set_authorizer(authorizer)
    guard = bank_guard(otel, conn, authorizer=authorizer)  # type: ignore[arg-type]
    assert guard.call("withdraw", {"account": "acc_1", "amount": 1}) == {"balance": 99}
    assert sqlite3.SQLITE_UPDATE in seen  # consulted during the dry run and the real call
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        conn.execute("DROP TABLE audit")


def test_savepoint_fork_needs_a_connection() -> None:
    with pytest.raises(tg.ToolDefinitionError, match=r"sqlite3\.Connection"):
        tg.SQLiteSavepointFork("bank.db")  # type: ignore[arg-type]


def test_a_plan_on_a_savepoint_leaves_the_database_unchanged(
    otel: Telemetry, db: tuple[sqlite3.Connection, sqlite3.Connection]
) -> None:
    conn, observer = db
    guard = bank_guard(otel, conn)
    plan = [
        {"tool": "withdraw", "arguments": {"account": "acc_1", "amount": 60}},
        {"tool": "withdraw", "arguments": {"account": "acc_1", "amount": 30}},
        {"tool": "withdraw", "arguments": {"account": "acc_1", "amount": 20}},  # 10 left
    ]
    verdict = guard.verify_plan(plan)
    assert not verdict.ok and verdict.failed == 2
    assert verdict.cause == "state_consistency" and verdict.check == "state.dry_run"
    assert "CHECK constraint failed" in str(verdict)
    assert [s.ran_on_fork for s in verdict.steps] == [True, True, True]
    assert guard.verify_plan(plan[:2]).ok
    assert balances(observer) == balances(conn) == {"acc_1": 100, "acc_2": 5}
    assert audit_rows(conn) == 0 and not conn.in_transaction
