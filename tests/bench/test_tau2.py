"""tau2 harness: a few airline and retail tasks, ground truth and wrong-id injection.

Needs tau2's domains (see benchmarks/README.md for the pinned --no-deps install line);
skipped with that line as the reason when they are not importable.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from benchmarks.tau2._tau2 import tau2_import_error

_problem = tau2_import_error()
needs_tau2 = pytest.mark.skipif(_problem is not None, reason=_problem or "")

if _problem is None:
    from benchmarks.tau2.experiment import (
        ground_truth_record,
        injection_record,
        replay_cause,
    )
    from benchmarks.tau2.inject import existing_ids, inject, injection_classes
    from benchmarks.tau2.oracle import replay
    from benchmarks.tau2.tasks import GroundTruth, load_tasks

ROOT = Path(__file__).resolve().parents[2]
N_PER_DOMAIN = 3


@cache
def _sample() -> tuple[GroundTruth, ...]:
    """The first tasks of each domain plus the first retail task with a deliberate error."""
    tasks = [*load_tasks("airline", N_PER_DOMAIN), *load_tasks("retail", N_PER_DOMAIN)]
    for t in load_tasks("retail", 30)[N_PER_DOMAIN:]:
        if replay("retail", t.calls).n_rejected:
            tasks.append(t)
            break
    return tuple(tasks)


def test_makefile_installs_the_documented_pins() -> None:
    from benchmarks.tau2._tau2 import TAU2_PIP

    makefile = (ROOT / "Makefile").read_text()
    line = next(ln for ln in makefile.splitlines() if ln.startswith("TAU2_PIP :="))
    assert line.split(":=", 1)[1].split() == TAU2_PIP.split()


@needs_tau2
def test_loader_keeps_assistant_actions_only() -> None:
    for domain in ("airline", "retail"):
        tasks = load_tasks(domain)
        assert len(tasks) > 10
        assert sum(len(t.calls) for t in tasks) > len(tasks)
        assert all(t.user_text for t in tasks)
        assert len({t.key for t in tasks}) == len(tasks)


@needs_tau2
def test_sample_contains_an_environment_rejection() -> None:
    # the retail ground truth includes deliberate failing calls: they must be in the sample
    assert any(replay(t.domain, t.calls).n_rejected for t in _sample())


@pytest.mark.parametrize("context", ["account"])
@needs_tau2
def test_ground_truth_has_no_false_positive_and_misses_no_rejection(context: str) -> None:
    for task in _sample():
        oracle = replay(task.domain, task.calls)
        rec = ground_truth_record(task, oracle, context)
        assert rec["false_positives"] == [], (task.key, rec["false_positives"])
        # every call tau2 rejects is flagged, before execution or as state_consistency
        assert set(rec["env_rejected_steps"]) <= set(rec["flagged_steps"]), task.key
        assert rec["guard_fed"] == oracle.fed, task.key
        assert rec["reaches_gold_state"], task.key


@needs_tau2
def test_strict_context_flags_lookups_missing_from_the_ground_truth() -> None:
    # Without the account context, a write-only ground truth uses ids no listed call produced.
    def from_nowhere(t: GroundTruth) -> bool:
        # a call uses an id that neither the user's text nor an earlier listed call gives
        return any(
            isinstance(v, str) and k.endswith("_id") and v not in t.user_text
            for c in t.calls
            for k, v in c.arguments.items()
        ) and not any(c.name.startswith("get_") for c in t.calls)

    write_only = next(t for t in load_tasks("airline", 30) if from_nowhere(t))
    oracle = replay("airline", write_only.calls)
    strict = ground_truth_record(write_only, oracle, "none")
    account = ground_truth_record(write_only, oracle, "account")
    assert strict["false_positives"], write_only.key
    assert all(fp["check"].startswith("dependency.") for fp in strict["false_positives"])
    assert account["false_positives"] == []


@needs_tau2
def test_injection_is_seeded_and_changes_exactly_one_id() -> None:
    task = next(t for t in _sample() if t.domain == "retail")
    for cls in injection_classes("retail"):
        a, b = inject(task, cls, seed=3), inject(task, cls, seed=3)
        if a is None:
            continue
        assert a == b
        changed = [
            (x.arguments, y.arguments)
            for x, y in zip(task.calls, a.task.calls, strict=True)
            if x != y
        ]
        assert len(changed) == 1
        kind = cls.split("_", 1)[1]
        ids = existing_ids("retail", kind)
        assert (a.new in ids) == (not cls.startswith("missing_"))
        if not cls.startswith("sibling_"):
            assert a.new not in task.user_text


@needs_tau2
def test_wrong_ids_are_blocked_before_execution_where_the_replay_fails() -> None:
    verdicts = []
    for task in _sample():
        gt = replay(task.domain, task.calls)
        if gt.fed <= len(task.calls):
            continue
        for cls in injection_classes(task.domain):
            if cls.startswith("sibling_"):
                continue  # see test_sibling_ids_are_only_caught_by_the_state
            rec = injection_record(task, gt, cls, seed=0, context="account")
            if rec is None:
                continue
            verdicts.append(rec["verdict"])
            # a nonexistent id always fails in tau2, at the very call that carries it
            if cls.startswith("missing_"):
                assert rec["replay_outcome"] == "env_rejected", rec
                assert rec["true_fed"] == rec["mutated_step"], rec
            assert rec["verdict"] == "guard_before_execution", rec
            assert rec["guard_cause"] == "dependency", rec
            assert rec["fed_agrees"], rec
    assert len(verdicts) >= 8


@needs_tau2
def test_sibling_ids_are_only_caught_by_the_state() -> None:
    # Another record of the same user passes the dependency check (the agent has seen it):
    # only a precondition or tau2 itself can refuse it, and a silent one stays silent.
    seen = 0
    for task in _sample():
        gt = replay(task.domain, task.calls)
        if gt.fed <= len(task.calls):
            continue
        for cls in injection_classes(task.domain):
            if not cls.startswith("sibling_"):
                continue
            rec = injection_record(task, gt, cls, seed=0, context="account")
            if rec is None:
                continue
            seen += 1
            assert rec["guard_cause"] != "dependency", rec
            if rec["replay_outcome"] == "env_rejected":
                assert rec["verdict"] in ("guard_before_execution", "environment_only"), rec
                assert rec["fed_agrees"], rec
            else:
                assert rec["verdict"] == rec["replay_outcome"], rec
                assert rec["guard_fed"] == rec["T"] + 1, rec
    assert seen >= 1


@needs_tau2
def test_replay_cause_reads_tau2_messages() -> None:
    assert replay_cause("Error: Order not found") == "dependency"
    assert replay_cause("Error: Non-pending order cannot be cancelled") == "precondition"
    assert replay_cause("Error: Gift card balance is not enough") == "state_consistency"


@needs_tau2
def test_end_to_end_command_writes_spans_and_report(tmp_path: Path) -> None:
    out = tmp_path / "tau2"
    cmd = [sys.executable, "-m", "benchmarks.tau2.run", "--limit", "1", "--jobs", "1"]
    subprocess.run([*cmd, "--no-strict", "--out", str(out)], cwd=ROOT, check=True)
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    report = json.loads((out / "report.json").read_text())
    assert report["overall"]["n"] == len(records)
    gt = [r for r in records if r["kind"] == "ground_truth"]
    assert len(gt) == 2
    # the report, read back from the span files, sees one trajectory per record
    for domain in ("airline", "retail"):
        group = next(
            g
            for g in report["groups"]
            if g["labels"] == {"domain": domain, "variant": "ground_truth", "context": "account"}
        )
        assert group["n"] == sum(r["domain"] == domain for r in gt)
    injected = [r for r in records if r["kind"] == "injection"]
    assert injected and all(r["guard_fed"] <= r["T"] for r in injected)
    assert "wrong-id injection" in (out / "summary.md").read_text()
