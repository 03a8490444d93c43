"""The demo's Dual-Loop agent: each ReAct mistake found by plan verification and repaired
before anything runs, except what verification does not check (a value's grounding)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolguard as tg
from toolguard.demo import dual_loop
from toolguard.demo.__main__ import _PEOPLE, run_episode
from toolguard.demo.agents import Task

ALICE = Task("message", "Alice", "+1-555-0199")
REMOVE_BOB = Task("remove", "Bob", "+1-555-0142")


@pytest.mark.parametrize(
    ("policy", "task", "cellular", "first_cause"),
    [
        ("clean", ALICE, True, None),
        ("phone_as_id", REMOVE_BOB, True, "dependency"),
        ("ignores_settings", ALICE, False, "precondition"),
        ("verbose", ALICE, True, "state_consistency"),  # only the app's own answer shows it
        ("invents", REMOVE_BOB, True, "schema"),
    ],
)
def test_the_draft_s_mistake_is_found_before_execution_and_repaired(
    otel: Any, policy: str, task: Task, cellular: bool, first_cause: str | None
) -> None:
    episode = run_episode(0, policy, task, cellular=cellular, loop="dual")
    traj, planning = episode.traj, episode.planning
    assert planning is not None
    assert traj.success is True
    assert traj.first_error_depth == traj.length + 1  # every executed call was valid
    assert planning.verifications == (1 if first_cause is None else 2)
    react = run_episode(0, policy, task, cellular=cellular, loop="react")
    assert react.traj.first_error_cause == first_cause  # the same mistake, found by execution


def test_verification_does_not_count_as_execution(otel: Any) -> None:
    episode = run_episode(0, "phone_as_id", REMOVE_BOB, cellular=True, loop="dual")
    assert episode.planning is not None and episode.planning.steps_verified >= 2
    assert episode.traj.length == 2  # search, remove: the verified plan, executed once
    assert [v.tool for v in episode.traj.verdicts] == ["search_contacts", "remove_contact"]


def test_an_ungrounded_value_passes_verification_and_is_blocked_when_executed(otel: Any) -> None:
    carol = next(p for p in _PEOPLE if p[0] == "Carol")
    episode = run_episode(0, "invents", Task("add", *carol), cellular=True, loop="dual")
    assert episode.planning is not None and episode.planning.verifications == 1
    assert episode.traj.first_error_cause == "information"
    assert episode.traj.success is False


def test_a_failure_the_planner_cannot_fix_leaves_the_plan_as_it_is() -> None:
    plan = dual_loop.draft("clean", ALICE)
    verdict = tg.PlanVerdict(steps=(), failed=1, cause="information", check="information.x")
    assert dual_loop.repair(plan, verdict, ALICE) is None


def test_the_demo_prints_the_dual_loop_comparison(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "toolguard.demo", "--out", str(out), "--episodes", "20"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "A = loop=react   B = loop=dual   paired on label 'episode': 20 tasks" in text
    table = text[text.index("\nloop ") + 1 :].splitlines()
    rows = {line.split()[0]: line.split() for line in table[1:3]}
    assert set(rows) == {"react", "dual"}
    # TER: the Dual-Loop agent's executed calls are valid more often than ReAct's.
    assert float(rows["dual"][2]) > float(rows["react"][2])
    assert float(rows["dual"][6]) > 0 and float(rows["react"][6]) == 0  # plans checked
    records, _ = tg.read_records([str(out)])
    result = tg.compare(records, {"loop": "react"}, {"loop": "dual"}, task_label="episode")
    assert float(rows["dual"][2]) == pytest.approx(result["metrics"]["ter"]["b"], abs=5e-4)
