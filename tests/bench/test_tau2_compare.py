"""tau2: the copy-on-read fork and the four guard configurations (benchmarks/tau2/compare.py).

Skipped with the install line as the reason when tau2's domains are not importable. No
timing is asserted.
"""

from __future__ import annotations

import pytest

from benchmarks.tau2._tau2 import tau2_import_error

_problem = tau2_import_error()
pytestmark = pytest.mark.skipif(_problem is not None, reason=_problem or "")

if _problem is None:
    import toolguard as tg
    from benchmarks._compare import summarise
    from benchmarks._forkcost import transactional
    from benchmarks.tau2 import undo
    from benchmarks.tau2._tau2 import fresh_environment, read_tools, tool_call
    from benchmarks.tau2.compare import CONFIGS, config_guard, run_task
    from benchmarks.tau2.cost import measure
    from benchmarks.tau2.cost import summarise as summarise_cost
    from benchmarks.tau2.fork import (
        CopyOnRead,
        JournaledTable,
        begin_live,
        fork_live,
        lazy_environment,
        roll_back_live,
    )
    from benchmarks.tau2.specs import Live
    from benchmarks.tau2.tasks import load_tasks


def test_a_change_on_the_fork_never_reaches_the_real_database():
    env = fresh_environment("airline")
    real = env.tools.db
    rid = next(r for r, res in real.reservations.items() if res.status != "cancelled")
    before = env.get_db_hash()
    forked = fork_live(Live(env=env)).env
    msg = forked.get_response(tool_call("cancel_reservation", {"reservation_id": rid}, "c1"))
    assert not msg.error
    assert forked.tools.db.reservations[rid].status == "cancelled"
    assert real.reservations[rid].status != "cancelled"
    assert env.get_db_hash() == before


def test_reads_hand_out_copies_and_writes_stay_in_the_fork():
    original = {"a": [1], "b": [2]}
    table = CopyOnRead(original)
    table["a"].append(9)
    for value in table.values():
        value.append(8)
    table["c"] = [3]
    assert original == {"a": [1], "b": [2]}
    assert table == {"a": [1, 9, 8], "b": [2, 8], "c": [3]}
    assert table.get("missing", 0) == 0
    assert table.pop("b") == [2, 8] and "b" not in table


def test_a_fork_of_a_fork_still_leaves_the_pristine_database_alone():
    env = fresh_environment("retail")
    before = env.get_db_hash()
    child = lazy_environment(lazy_environment(env))
    uid = next(iter(env.tools.db.users))
    child.tools.db.users[uid].name.first_name = "Changed"
    assert env.tools.db.users[uid].name.first_name != "Changed"
    assert env.get_db_hash() == before


def test_fork_alone_catches_every_rejection_on_a_few_tasks():
    tasks = [*load_tasks("airline", 3), *load_tasks("retail", 3)]
    records = [r for t in tasks for r in run_task(t, 0, tuple(CONFIGS))]
    assert all(r["lazy_oracle_agrees"] for r in records)
    summary = summarise(records, {k: c.label for k, c in CONFIGS.items()})
    fork = summary["fork"]
    rejections = fork["mutations"]["env_rejections"] + fork["ground_truth"]["env_rejections"]
    assert rejections > 5
    assert fork["misses"] == []
    assert fork["false_positive_list"] == []
    assert fork["mutations"]["caught_by_dry_run"] >= 1  # a sibling id only tau2's state refuses
    assert summary["schema_deps"]["misses"]  # ... which schema + dependencies let through
    copy = summary["fork_copy"]  # the copy on read: a separate run, checked against the real
    assert copy["misses"] == [] and copy["false_positive_list"] == []
    both = [copy["ground_truth"], copy["mutations"]]
    assert sum(c["dry_run_agrees"] for c in both) == sum(c["dry_runs"] for c in both) > 0


def test_cost_rows_pair_each_call_with_its_fork():
    tasks = load_tasks("retail", 1)
    rows = measure(tasks, tg.CallbackFork(fork=fork_live))
    assert len(rows) == len(tasks[0].calls)
    assert all(r["fork_s"] is not None and r["exec_s"] > 0 for r in rows)


def test_the_undo_on_read_is_measured_as_running_the_call_once():
    rows = measure(load_tasks("retail", 1))
    stats = summarise_cost(rows)
    assert stats["all"]["transactional"] and stats["all"]["calls"] == len(rows)


def test_a_rolled_back_call_leaves_the_database_as_it_was():
    env = fresh_environment("airline")
    rid = next(r for r, res in env.tools.db.reservations.items() if res.status != "cancelled")
    before = env.get_db_hash()
    transaction = begin_live(Live(env=env))
    assert isinstance(env.tools.db.reservations, JournaledTable)
    msg = env.get_response(tool_call("cancel_reservation", {"reservation_id": rid}, "c1"))
    assert not msg.error and env.tools.db.reservations[rid].status == "cancelled"
    roll_back_live(transaction)
    assert type(env.tools.db.reservations) is dict
    assert env.get_db_hash() == before


def test_the_undo_on_read_undoes_and_keeps_exactly_on_a_task():
    counts = undo.check_all(load_tasks("retail", 1))
    assert counts["calls"] > 5
    assert counts["rollback_exact"] == counts["same_answer"] == counts["calls"]
    assert counts["keep_exact"] == counts["trajectories"]
    assert counts["read_calls"] > 0 and counts["read_unchanged"] == counts["read_calls"]


def test_read_tools_are_tried_in_a_transaction_that_journals_nothing():
    reads = read_tools("retail")
    assert "get_order_details" in reads and "calculate" in reads
    assert "cancel_pending_order" not in reads
    guard, _ = config_guard("retail", "fork")
    read = guard.get_tool("get_order_details").dry_run
    write = guard.get_tool("cancel_pending_order").dry_run
    assert transactional(read) and transactional(write) and read is not write
    assert read.fork(Live(env=fresh_environment("retail"))) is None  # no journal
    copying, _ = config_guard("retail", "fork_copy")  # a copy is a run of its own: no split
    assert (
        copying.get_tool("get_order_details").dry_run
        is copying.get_tool("cancel_pending_order").dry_run
    )
