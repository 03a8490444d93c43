"""Ground-truth and mutation runs: the guard's verdicts against the raw replay's.

For each trajectory the raw replay gives the true first-error depth (first step the
environment rejected) and the outcome Y (BFCL's per-turn state and response check); the
guarded run, on identical backends, gives the guard's FED and cause. Comparing the two is
what this harness measures.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from benchmarks.bfcl.data import Task
from benchmarks.bfcl.guarded import PRE_EXECUTION, GuardedRun, Harness
from benchmarks.bfcl.mutations import MUTATION_CLASSES, Mutation, mutate
from benchmarks.bfcl.oracle import Replay, ground_truth_replay, reference, replay

# Exceptions BFCL's executor raises before the method body runs: the call itself is ill-formed.
_SCHEMA_EXCEPTIONS = frozenset({"NameError", "TypeError"})


# The cause an injected error of each class should get (what the mutation actually broke).
EXPECTED_CAUSES: dict[str, frozenset[str]] = {
    "wrong_id": frozenset({"dependency", "precondition"}),
    "wrong_type": frozenset({"schema"}),
    "swap": frozenset({"dependency", "precondition"}),
    "invented_value": frozenset({"information"}),
    "unknown_tool": frozenset({"schema"}),
    "dropped_prerequisite": frozenset({"dependency", "precondition"}),
}


def labels(task: Task, method: str, **extra: str) -> dict[str, str]:
    return {
        "dataset": "bfcl",
        "category": task.category,
        "task": task.id,
        "method": method,
        **extra,
    }


@dataclass
class Flag:
    """A ground-truth call the guard flagged."""

    task: str
    step: int
    tool: str
    cause: str
    check: str
    message: str
    env_rejected: bool  # the environment rejected the same call: the guard only agrees


@dataclass
class GroundTruthResult:
    n_tasks: int = 0
    n_calls: int = 0
    env_rejections: int = 0
    flags: list[Flag] = field(default_factory=list)
    not_successful: list[str] = field(default_factory=list)  # Y = 0 on its own ground truth

    @property
    def false_positives(self) -> list[Flag]:
        return [f for f in self.flags if not f.env_rejected]


def run_ground_truth(tasks: list[Task], harness: Harness) -> GroundTruthResult:
    out = GroundTruthResult()
    for task in tasks:
        raw = ground_truth_replay(task)
        run = harness.run(
            task, task.flat_calls(), task.id, labels(task, "ground_truth"), success=raw.success
        )
        out.n_tasks += 1
        out.n_calls += len(raw.outcomes)
        out.env_rejections += sum(o.rejected for o in raw.outcomes)
        if not raw.success:
            out.not_successful.append(task.id)
        for v in run.verdicts:
            if not v.valid:
                out.flags.append(
                    Flag(
                        task.id,
                        v.step,
                        v.tool,
                        str(v.cause),
                        str(v.check),
                        str(v.message),
                        raw.outcomes[v.step - 1].rejected,
                    )
                )
    return out


@dataclass
class MutationOutcome:
    task: str
    kind: str
    detail: str
    position: int
    length: int
    env_fed: int
    env_cause: str | None  # "schema" (ill-formed call) or "state" (rejected by the backend)
    success: bool | None
    guard_fed: int
    guard_cause: str | None
    guard_check: str | None

    @property
    def verdict(self) -> str:
        """guard (before execution) / env_only / silent (Y=0, nobody objected) / harmless."""
        if self.guard_cause in PRE_EXECUTION:
            return "guard"
        if self.env_fed <= self.length or self.guard_cause is not None:
            return "env_only"
        return "harmless" if self.success else "silent"

    @property
    def fed_agrees(self) -> bool:
        return self.guard_fed == self.env_fed

    @property
    def cause_agrees(self) -> bool | None:
        """The guard's class of cause matches what the backend's rejection says."""
        if self.env_cause is None:
            return None
        if self.env_cause == "schema":
            return self.guard_cause == "schema"
        return self.guard_cause in ("dependency", "precondition", "state_consistency")


def _env_cause(rep: Replay) -> str | None:
    if rep.fed > len(rep.outcomes):
        return None
    outcome = rep.outcomes[rep.fed - 1]
    return "schema" if outcome.exception in _SCHEMA_EXCEPTIONS else "state"


def evaluate_mutation(task: Task, m: Mutation, harness: Harness) -> MutationOutcome:
    rep = replay(task, m.calls, reference(task))
    run: GuardedRun = harness.run(
        task,
        m.calls,
        f"{task.id}/{m.kind}",
        labels(task, f"mutation:{m.kind}"),
        success=rep.success,
    )
    first = run.first_flag()
    return MutationOutcome(
        task=task.id,
        kind=m.kind,
        detail=m.detail,
        position=m.position,
        length=len(m.calls),
        env_fed=rep.fed,
        env_cause=_env_cause(rep),
        success=rep.success,
        guard_fed=run.fed,
        guard_cause=run.cause,
        guard_check=first.check if first is not None else None,
    )


def run_mutations(
    tasks: list[Task], harness: Harness, kinds: tuple[str, ...] = MUTATION_CLASSES, seed: int = 0
) -> list[MutationOutcome]:
    out = []
    for kind in kinds:
        for task in tasks:
            m = mutate(task, kind, seed)
            if m is not None:
                out.append(evaluate_mutation(task, m, harness))
    return out


def mutation_table(outcomes: list[MutationOutcome]) -> list[dict[str, Any]]:
    """One row per mutation class: the headline figures of this harness."""
    rows = []
    for kind in dict.fromkeys(o.kind for o in outcomes):
        mine = [o for o in outcomes if o.kind == kind]
        verdicts = Counter(o.verdict for o in mine)
        env_rejected = [o for o in mine if o.env_fed <= o.length]
        guard_pre = [o for o in mine if o.verdict == "guard"]
        rows.append(
            {
                "mutation": kind,
                "n": len(mine),
                "guard_before_execution": verdicts["guard"],
                "env_only": verdicts["env_only"],
                "silent": verdicts["silent"],
                "harmless": verdicts["harmless"],
                "guard_caught_env_silent": sum(o.env_fed > o.length for o in guard_pre),
                "env_rejected": len(env_rejected),
                "fed_agree": sum(o.fed_agrees for o in env_rejected),
                "guard_earlier": sum(o.guard_fed < o.env_fed for o in env_rejected),
                "cause_agree": sum(bool(o.cause_agrees) for o in env_rejected),
                "cause_expected": sum(o.guard_cause in EXPECTED_CAUSES[kind] for o in mine),
                "guard_causes": dict(Counter(o.guard_cause or "none" for o in mine)),
            }
        )
    return rows
