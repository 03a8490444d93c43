"""One task end to end: oracle and guarded replay of its ground truth, then of each injection.

Returns plain dict records (one per trajectory) so worker processes can hand them back.
"""

from __future__ import annotations

from typing import Any

from benchmarks.tau2.context import Context
from benchmarks.tau2.guarded import PRE_EXECUTION, GuardedRun, guarded_replay
from benchmarks.tau2.inject import inject, injection_classes
from benchmarks.tau2.oracle import Replay, replay
from benchmarks.tau2.tasks import GroundTruth


def replay_cause(message: str) -> str:
    """The protocol cause the environment's own error message points to, read alone.

    "X not found": the id refers to no such record (dependency); "Non-pending /
    Non-delivered ...": the record is in the wrong state (precondition); anything else is a
    rejected transition (state_consistency).
    """
    text = message.lower()
    if "not found" in text:
        return "dependency"
    if text.startswith("error: non-"):
        return "precondition"
    return "state_consistency"


STATE_CAUSES = "precondition|state_consistency"


def expected_cause(cls: str, message: str | None) -> str | None:
    """The primary cause the protocol assigns, given what the replay showed.

    A missing or foreign id was never produced nor given in the trajectory: dependency,
    whatever tau2 then says (the protocol checks references before state). A sibling id
    was seen (the user's own record), so the replay decides: its rejection is a state
    problem (either cause, ``|``-separated), or no cause at all when tau2 accepted it
    (executable, hence valid).
    """
    if not cls.startswith("sibling_"):
        return "dependency"
    if message is None:
        return None
    # a state problem: a precondition where one is declared, else tau2's rejection
    return STATE_CAUSES


def _labels(task: GroundTruth, variant: str, context: str) -> dict[str, str]:
    return {
        "dataset": "tau2",
        "domain": task.domain,
        "task": task.task_id,
        "variant": variant,
        "context": context,
    }


def _false_positives(oracle: Replay, run: GuardedRun) -> list[dict[str, Any]]:
    """Calls the guard flagged although the raw environment executed them fine."""
    return [
        {"step": i, "tool": v.name, "check": v.check, "message": v.message}
        for i, (o, v) in enumerate(zip(oracle.steps, run.steps, strict=True), start=1)
        if v.cause is not None and not o.rejected
    ]


def ground_truth_record(task: GroundTruth, oracle: Replay, context: Context) -> dict[str, Any]:
    run = guarded_replay(
        task,
        _labels(task, "ground_truth", context),
        reference_hash=oracle.db_hash,
        context=context,
    )
    env_rejected = [i for i, s in enumerate(oracle.steps, start=1) if s.rejected]
    flagged = [i for i, v in enumerate(run.steps, start=1) if v.cause is not None]
    return {
        "kind": "ground_truth",
        "context": context,
        "domain": task.domain,
        "task": task.task_id,
        "T": len(task.calls),
        "oracle_fed": oracle.fed,
        "env_rejected_steps": env_rejected,
        "guard_fed": run.fed,
        "guard_cause": run.cause,
        "flagged_steps": flagged,
        "caught_before_execution": [
            i for i in env_rejected if run.steps[i - 1].cause in PRE_EXECUTION
        ],
        "false_positives": _false_positives(oracle, run),
        "reaches_gold_state": run.db_hash == oracle.db_hash,
    }


def injection_record(
    task: GroundTruth, gt: Replay, cls: str, seed: int, context: Context
) -> dict[str, Any] | None:
    inj = inject(task, cls, seed)
    if inj is None:
        return None
    oracle = replay(task.domain, inj.task.calls, always_hash=False)
    T = len(task.calls)
    message = oracle.steps[oracle.fed - 1].content if oracle.fed <= T else None
    true_cause = expected_cause(cls, message)
    if message is not None:
        outcome, true_fed = "env_rejected", oracle.fed
    else:
        outcome = "silent" if oracle.db_hash != gt.db_hash else "no_db_effect"
        # tau2 accepted everything: an unproduced id is still invalid at the mutated call;
        # a sibling id is executable and known, so the trajectory is valid by the protocol
        true_fed = T + 1 if true_cause is None else inj.step
    run = guarded_replay(inj.task, _labels(task, cls, context), context=context)
    first = run.steps[run.fed - 1] if run.fed <= T else None
    at = run.steps[inj.step - 1]
    if at.blocked:
        verdict = "guard_before_execution"
    elif at.cause is not None:
        verdict = "environment_only"  # it ran and tau2 rejected it
    elif any(v.cause for v in run.steps[inj.step :]):
        verdict = "flagged_later"  # it ran unnoticed; a later call tripped over it
    else:
        verdict = outcome  # the guard saw nothing: silent or without DB effect
    return {
        "kind": "injection",
        "context": context,
        "class": cls,
        "domain": task.domain,
        "task": task.task_id,
        "T": T,
        "mutated_step": inj.step,
        "arg": inj.arg,
        "old": inj.old,
        "new": inj.new,
        "replay_outcome": outcome,
        "replay_message": message,
        "replay_message_cause": replay_cause(message) if message else None,
        "true_fed": true_fed,
        "true_cause": true_cause,
        "guard_fed": run.fed,
        "guard_cause": run.cause,
        "guard_check": first.check if first else None,
        "verdict": verdict,
        "fed_agrees": run.fed == true_fed,
        "cause_agrees": run.fed == true_fed
        and (run.cause == true_cause or str(run.cause) in str(true_cause).split("|")),
    }


def run_task(
    task: GroundTruth, seed: int, context: Context, strict_gt: bool
) -> list[dict[str, Any]]:
    gt = replay(task.domain, task.calls)
    records = [ground_truth_record(task, gt, context)]
    if strict_gt and context != "none":
        records.append(ground_truth_record(task, gt, "none"))
    # Inject only where the ground truth itself replays cleanly: a deliberate error earlier
    # in the task (retail) would otherwise hide where the injected one surfaces.
    if gt.fed <= len(task.calls):
        return records
    for cls in injection_classes(task.domain):
        rec = injection_record(task, gt, cls, seed, context)
        if rec is not None:
            records.append(rec)
    return records
