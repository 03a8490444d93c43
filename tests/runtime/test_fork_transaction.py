"""Transactional dry runs: the call runs once, inside its strategy's transaction, and is kept
when the environment accepts it or rolled back and blocked when it rejects it
(toolguard/runtime/calls/transaction.py). Strategies: ``tg.UndoLogFork``, ``tg.SQLiteSavepointFork``
and a ``tg.CallbackFork(..., in_place=True, keep=...)``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING, Annotated, Any

import pytest

import toolguard as tg

if TYPE_CHECKING:  # the root conftest's type; importing it at run time could find another conftest
    from conftest import Telemetry


class Bank:
    """An environment whose tools change it before they find out the call is wrong."""

    def __init__(self) -> None:
        self.accounts: dict[str, dict[str, Any]] = {"acc_1": {"balance": 100, "log": []}}
        self.runs = 0

    def withdraw(self, account: str, amount: int) -> dict[str, Any]:
        self.runs += 1
        entry = self.accounts[account]  # KeyError: the environment's rejection
        entry["log"].append(-amount)  # written before the check, as real code does
        entry["balance"] -= amount
        if entry["balance"] < 0:
            raise ValueError(f"insufficient funds: balance would be {entry['balance']}")
        return {"balance": entry["balance"]}

    def audit(self) -> dict[str, Any]:
        self.runs += 1
        return {"error": "audit is closed today"}  # a rejection by result


def bank_guard(otel: Telemetry, bank: Bank, **options: Any) -> tg.Guard:
    guard = otel.guard(
        state=bank,
        dry_run=tg.UndoLogFork(),
        error_result=lambda r: isinstance(r, dict) and "error" in r,
        **options,
    )
    guard.proxy(bank, ["withdraw", "audit"])
    return guard


def test_an_accepted_call_runs_once_and_stands(otel: Telemetry) -> None:
    bank = Bank()
    guard = bank_guard(otel, bank)
    assert guard.call("withdraw", {"account": "acc_1", "amount": 30}) == {"balance": 70}
    assert bank.runs == 1  # not tried and then run again
    assert bank.accounts["acc_1"] == {"balance": 70, "log": [-30]}
    assert type(bank) is Bank
    assert otel.only_call().attributes["toolguard.dry_run"] == "passed"


def test_a_rejected_call_is_rolled_back_and_blocked(otel: Telemetry) -> None:
    bank = Bank()
    guard = bank_guard(otel, bank)
    with otel.trajectory("t1") as traj:
        out = guard.call("withdraw", {"account": "acc_1", "amount": 500})
        by_result = guard.call("audit", {})
    assert isinstance(out, tg.Rejection)
    assert (out.cause, out.check, out.decision) == ("state_consistency", "state.dry_run", "blocked")
    assert "ValueError: insufficient funds: balance would be -400" in out.message
    assert "rolled back" in str(out)  # what the model reads
    assert isinstance(by_result, tg.Rejection) and "audit is closed today" in by_result.message
    assert bank.accounts["acc_1"] == {"balance": 100, "log": []}  # the early write undone
    assert bank.runs == 0  # its run counter is part of the state, rolled back too
    assert [v.decision for v in traj.verdicts] == ["blocked", "blocked"]
    assert [s.attributes["toolguard.dry_run"] for s in otel.call_spans()] == ["rejected"] * 2


def test_a_direct_call_raises_the_rejection(otel: Telemetry) -> None:
    bank = Bank()
    guard = otel.guard(state=bank, dry_run=tg.UndoLogFork())
    guarded = guard.proxy(bank, ["withdraw"])
    with pytest.raises(tg.ToolCallRejected, match="insufficient funds"):
        guarded.withdraw("acc_1", 500)
    assert bank.accounts["acc_1"]["balance"] == 100
    assert guarded.withdraw("acc_1", 1) == {"balance": 99}


def test_log_mode_keeps_the_rejected_call_as_it_would_have_run(otel: Telemetry) -> None:
    bank = Bank()
    guard = bank_guard(otel, bank, mode="log")
    with otel.trajectory("t2") as traj:
        out = guard.call("withdraw", {"account": "acc_1", "amount": 500})
    assert isinstance(out, tg.Rejection)  # the real call raised: the agent reads why
    assert bank.runs == 1
    assert bank.accounts["acc_1"] == {"balance": -400, "log": [-500]}  # unguarded behaviour
    verdict = traj.verdicts[0]
    assert verdict.decision == "logged"
    assert verdict.failed_checks == ("state.dry_run", "state.exception")


def test_a_state_parameter_is_journaled(otel: Telemetry) -> None:
    state: dict[str, Any] = {"rows": [1, 2], "n": 2}
    guard = otel.guard(state=state, dry_run=tg.UndoLogFork())

    @guard.tool
    def drop(index: int, db: Annotated[dict[str, Any], tg.State]) -> int:
        db["n"] -= 1
        return int(db["rows"].pop(index))

    assert isinstance(guard.call("drop", {"index": 5}), tg.Rejection)
    assert state == {"rows": [1, 2], "n": 2}
    assert guard.call("drop", {"index": 0}) == 1
    assert state == {"rows": [2], "n": 1}


def test_async_tools_run_in_the_transaction(otel: Telemetry) -> None:
    state: dict[str, Any] = {"stock": 1}
    guard = otel.guard(state=state, dry_run=tg.UndoLogFork())

    @guard.tool
    async def take(n: int, db: Annotated[dict[str, Any], tg.State]) -> int:
        db["stock"] -= n
        await asyncio.sleep(0)
        if db["stock"] < 0:
            raise ValueError("out of stock")
        return int(db["stock"])

    async def main() -> tuple[Any, Any]:
        return await guard.acall("take", {"n": 2}), await guard.acall("take", {"n": 1})

    blocked, taken = asyncio.run(main())
    assert isinstance(blocked, tg.Rejection) and "out of stock" in blocked.message
    assert taken == 0 and state == {"stock": 0}


def test_a_cancellation_rolls_the_call_back(otel: Telemetry) -> None:
    bank = Bank()
    guard = otel.guard(state=bank, dry_run=tg.UndoLogFork())

    @guard.tool
    def interrupted(db: Annotated[Bank, tg.State]) -> None:
        db.accounts["acc_1"]["balance"] = 0
        raise KeyboardInterrupt

    with otel.trajectory("t3") as traj, pytest.raises(KeyboardInterrupt):
        guard.call("interrupted", {})
    assert bank.accounts["acc_1"]["balance"] == 100
    assert traj.verdicts[0].decision == "cancelled"


def test_a_nested_guarded_call_is_no_step_and_opens_no_transaction(otel: Telemetry) -> None:
    state: dict[str, Any] = {"n": 0}
    forks: list[Any] = []
    journal = tg.UndoLogFork()
    counting = tg.CallbackFork(
        lambda s: forks.append(s) or journal.fork(s),
        journal.discard,
        in_place=True,
        keep=journal.keep,
    )
    guard = otel.guard(state=state, dry_run=counting)

    @guard.tool
    def inner(db: Annotated[dict[str, Any], tg.State]) -> int:
        db["n"] += 1
        return int(db["n"])

    @guard.tool
    def outer(db: Annotated[dict[str, Any], tg.State]) -> int:
        return int(inner(db=db)) * 10

    with otel.trajectory("t4") as traj:
        assert guard.call("outer", {}) == 10
    assert len(forks) == 1 and traj.length == 1


# -- user-supplied transactions and their failures ---------------------------------------------


class Recorder:
    def __init__(self, fail: str | None = None) -> None:
        self.events: list[str] = []
        self.fail = fail

    def _do(self, what: str) -> None:
        self.events.append(what)
        if what == self.fail:
            raise RuntimeError(f"{what} broke")

    def fork(self, state: Any) -> Any:
        self._do("fork")
        return state

    def keep(self, _: Any) -> None:
        self._do("keep")

    def discard(self, _: Any) -> None:
        self._do("discard")

    def strategy(self) -> tg.CallbackFork:
        return tg.CallbackFork(self.fork, self.discard, in_place=True, keep=self.keep)


def test_exactly_one_of_keep_and_discard_is_called(otel: Telemetry) -> None:
    recorder = Recorder()
    guard = otel.guard(state={}, dry_run=recorder.strategy())

    @guard.tool
    def check(ok: bool) -> str:
        if not ok:
            raise ValueError("not ok")
        return "fine"

    assert guard.call("check", {"ok": True}) == "fine"
    assert isinstance(guard.call("check", {"ok": False}), tg.Rejection)
    assert recorder.events == ["fork", "keep", "fork", "discard"]


@pytest.mark.parametrize("policy", ["fail_closed", "fail_open"])
def test_a_keep_that_fails_rolls_back_then_follows_the_policy(otel: Telemetry, policy: str) -> None:
    recorder = Recorder(fail="keep")
    runs: list[int] = []
    guard = otel.guard(state={}, dry_run=recorder.strategy(), on_guard_error=policy)

    @guard.tool
    def act() -> str:
        runs.append(1)
        return "acted"

    out = guard.call("act", {})
    assert recorder.events == ["fork", "keep", "discard"]
    if policy == "fail_closed":
        assert isinstance(out, tg.Rejection) and out.check == "state.dry_run"
        assert "the dry run's keep raised RuntimeError" in out.message
        assert runs == [1]
    else:
        assert out == "acted" and runs == [1, 1]  # rolled back, then run as if unguarded
    assert otel.only_call().attributes["toolguard.dry_run"] == "guard_error"


def test_a_failing_transaction_start_blocks_before_the_call(otel: Telemetry) -> None:
    recorder = Recorder(fail="fork")
    runs: list[int] = []
    guard = otel.guard(state={}, dry_run=recorder.strategy())

    @guard.tool
    def act() -> str:
        runs.append(1)
        return "acted"

    out = guard.call("act", {})
    assert isinstance(out, tg.Rejection) and "the dry run's fork raised RuntimeError" in out.message
    assert runs == []


def test_keep_needs_an_in_place_strategy() -> None:
    with pytest.raises(tg.ToolDefinitionError, match="needs in_place=True"):
        tg.CallbackFork(lambda s: s, keep=lambda s: None)
    with pytest.raises(tg.ToolDefinitionError, match="keep must be callable"):
        tg.CallbackFork(lambda s: s, in_place=True, keep=3)  # type: ignore[arg-type]


# -- SQLite: RELEASE keeps the call, the tool's own COMMIT still happens ----------------------


@pytest.fixture
def db(tmp_path: Any) -> tuple[sqlite3.Connection, sqlite3.Connection]:
    path = tmp_path / "bank.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER)")
    conn.execute("CREATE TABLE audit (account TEXT, amount INTEGER)")
    conn.execute("INSERT INTO accounts VALUES ('acc_1', 100)")
    conn.commit()
    return conn, sqlite3.connect(path)


def test_sqlite_runs_once_and_the_tools_commit_is_carried_out(
    otel: Telemetry, db: tuple[sqlite3.Connection, sqlite3.Connection]
) -> None:
    conn, other = db
    guard = otel.guard(dry_run=tg.SQLiteSavepointFork(conn))

    @guard.tool
    def withdraw(account: str, amount: int) -> int:
        conn.execute("INSERT INTO audit VALUES (?, ?)", (account, amount))
        conn.execute("UPDATE accounts SET balance = balance - ? WHERE id = ?", (amount, account))
        (balance,) = conn.execute(
            "SELECT balance FROM accounts WHERE id = ?", (account,)
        ).fetchone()
        if balance < 0:
            raise ValueError(f"balance would be {balance}")
        conn.commit()
        return int(balance)

    assert guard.call("withdraw", {"account": "acc_1", "amount": 30}) == 70
    assert not conn.in_transaction  # the tool's COMMIT happened after RELEASE
    assert other.execute("SELECT balance FROM accounts").fetchone() == (70,)
    assert other.execute("SELECT count(*) FROM audit").fetchone() == (1,)  # ran once
    out = guard.call("withdraw", {"account": "acc_1", "amount": 500})
    assert isinstance(out, tg.Rejection) and "balance would be -430" in out.message
    assert conn.execute("SELECT count(*) FROM audit").fetchone() == (1,)  # rolled back
    assert other.execute("SELECT balance FROM accounts").fetchone() == (70,)


def test_a_plan_verified_in_an_undo_log_leaves_the_state_as_it_was(otel: Telemetry) -> None:
    bank = Bank()
    guard = bank_guard(otel, bank)
    verdict = guard.verify_plan(
        [
            tg.PlanStep("withdraw", {"account": "acc_1", "amount": 60}),
            tg.PlanStep("withdraw", {"account": "acc_1", "amount": 30}),
            tg.PlanStep("withdraw", {"account": "acc_1", "amount": 20}),  # 10 left by then
        ]
    )
    assert not verdict.ok and verdict.failed == 2 and verdict.check == "state.dry_run"
    assert "balance would be -10" in verdict.message
    assert bank.accounts["acc_1"] == {"balance": 100, "log": []} and type(bank) is Bank


def _no_op(_: Any) -> None:
    return None


def test_a_tool_that_changes_nothing_is_its_own_dry_run_with_nothing_journaled(
    otel: Telemetry,
) -> None:
    bank = Bank()
    guard = bank_guard(otel, bank)
    read_only = tg.CallbackFork(_no_op, _no_op, in_place=True, keep=_no_op)
    guard.proxy(bank, {"audit": tg.ToolSpec(dry_run=read_only)})  # replaces the first proxy's
    assert guard.get_tool("audit").dry_run is read_only
    assert guard.get_tool("withdraw").dry_run is not read_only  # the guard's undo log
    rejected = guard.call("audit", {})
    assert isinstance(rejected, tg.Rejection) and rejected.decision == "blocked"
    assert rejected.check == "state.dry_run" and "audit is closed today" in rejected.message
    assert bank.runs == 1  # ran once, and nothing journaled it: a declaration, as documented
    assert otel.only_call().attributes["toolguard.dry_run"] == "rejected"
