"""BFCL: the four guard configurations (benchmarks/bfcl/compare.py), on a few tasks.

Skipped with a reason where bfcl-eval is not installed (make test installs it). No timing is
asserted: the cost pass is only checked to pair every call with its figures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval not installed (make test installs it)")

import toolguard as tg
from benchmarks._compare import summarise
from benchmarks._forkcost import TimedFork
from benchmarks.bfcl import compare, cost, undo
from benchmarks.bfcl.compare_report import DATA_BUG, LOOKUP_SKIPPED, classify
from benchmarks.bfcl.configs import CONFIGS, spec
from benchmarks.bfcl.data import load_tasks

ROOT = Path(__file__).resolve().parents[2]
LABELS = {k: c.label for k, c in CONFIGS.items()}


@pytest.fixture(scope="module")
def records():
    tasks = load_tasks(("base", "long_context"), limit=4)
    kinds = ("wrong_id", "swap", "dropped_prerequisite", "wrong_type")
    return compare.run_all(tasks, kinds=kinds, jobs=1)


def test_configurations_differ_only_in_state_rules_and_dry_run():
    bare, ruled = spec("TicketAPI", "close_ticket", "fork"), spec("TicketAPI", "close_ticket")
    assert bare.refs == ruled.refs == {"ticket_id": "ticket_id"}
    assert not bare.preconditions and ruled.preconditions
    assert CONFIGS["fork"].dry_run and not CONFIGS["fork"].state_rules
    assert CONFIGS["fork_rules"].dry_run and CONFIGS["fork_rules"].state_rules


def test_fork_alone_blocks_every_rejection_and_flags_no_accepted_ground_truth_call(records):
    summary = summarise(records, LABELS)
    fork = summary["fork"]
    mut = fork["mutations"]
    assert mut["env_rejections"] > 20
    assert mut["caught_before_execution"] == mut["env_rejections"]
    assert fork["misses"] == []
    assert fork["false_positive_list"] == []
    # the dry run, not a hand rule, is what catches the state errors here
    assert mut["caught_by_dry_run"] > 0
    # the same with a copying fork, whose verdict is a separate run checked against the real
    copy = summary["fork_copy"]
    assert copy["mutations"]["caught_before_execution"] == mut["env_rejections"]
    both = [copy["ground_truth"], copy["mutations"]]
    assert sum(c["dry_run_agrees"] for c in both) == sum(c["dry_runs"] for c in both) > 0
    assert summary["schema_deps"]["mutations"]["caught_before_execution"] < mut["env_rejections"]


def test_every_call_is_recorded_once_per_configuration(records):
    per_config = {k: [r for r in records if r["config"] == k] for k in CONFIGS}
    counts = {len(v) for v in per_config.values()}
    assert len(counts) == 1
    key = ("task", "method", "step", "env_rejected")
    first, *rest = per_config.values()
    assert all([tuple(r[k] for k in key) for r in first] ==
               [tuple(r[k] for k in key) for r in other] for other in rest)  # fmt: skip


def test_ground_truth_flags_are_classified_from_the_data():
    variant_dropped = {
        "task": "multi_turn_miss_func_178",
        "step": 4,
        "tool": "purchase_insurance",
        "check": "dependency.booking_id",
        "env_rejected": False,
    }
    kind, why = classify(variant_dropped)
    assert kind == DATA_BUG and "base task" in why
    hidden = {
        "task": "multi_turn_base_106",
        "step": 4,
        "tool": "get_ticket",
        "check": "dependency.ticket_id",
        "env_rejected": False,
    }
    assert classify(hidden)[0] == LOOKUP_SKIPPED
    assert classify({**hidden, "check": "schema.tool"})[0] == DATA_BUG
    assert classify({**hidden, "env_rejected": True})[0] == DATA_BUG
    assert classify({**hidden, "check": "precondition.x"})[0] == "unclassified"


def test_cost_rows_pair_each_ground_truth_call_with_its_fork():
    tasks = load_tasks(("base",), limit=2)
    fork = TimedFork(tg.DeepCopyFork())
    rows = cost.measure(tasks, fork)
    assert len(rows) == sum(len(t.flat_calls()) for t in tasks)
    assert all(r["exec_s"] >= 0 and r["fork_s"] is not None for r in rows if r["backend"])
    stats = cost.summarise(rows)
    assert stats["all"]["calls"] == sum(r["backend"] is not None for r in rows)
    assert stats["all"]["executor_us"] > 0 and not stats["all"]["transactional"]
    assert all(r["executor_s"] > 0 for r in rows)


def test_the_undo_log_is_measured_as_running_the_call_once():
    tasks = load_tasks(("base",), limit=2)
    rows = cost.measure(tasks, tg.UndoLogFork())
    stats = cost.summarise(rows)
    assert stats["all"]["transactional"] and stats["all"]["fork_us"] > 0


def test_the_undo_log_undoes_and_keeps_exactly_on_real_backends():
    tasks = load_tasks(("base", "long_context"), limit=3)
    counts = undo.check_all(tasks, kinds=("wrong_id", "swap"), jobs=1)
    assert counts["calls"] > 30
    assert counts["rollback_exact"] == counts["keep_exact"] == counts["calls"]
    assert counts["same_answer"] == counts["calls"]


def test_compare_command_writes_the_tables(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bfcl", "compare", "--limit", "1", "--categories",
         "base", "--mutations", "wrong_id", "--jobs", "1", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "compare.md").read_text()
    for section in (
        "## Configurations",
        "## Targets (fork dry-run alone, tg.UndoLogFork())",
        "## Cost per call with tg.DeepCopyFork()",
        "## Does the undo log undo exactly?",
    ):
        assert section in text
    assert "Undo log exact: **yes**" in text
    assert (tmp_path / "compare.json").is_file()
