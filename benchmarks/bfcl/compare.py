"""The four guard configurations side by side on BFCL multi-turn (issue 15).

For every trajectory (the ground truth of each task, and each seeded mutation of it) the raw
backends are replayed once (the oracle: which calls the environment rejects), then the
trajectory is replayed through the guard under each configuration of ``configs.CONFIGS``, in
log mode so that every call still executes and the guarded backends stay in step with the
raw ones. Per call: did the environment reject it, did the guard flag it before execution
(a pre-execution cause, or the fork dry-run). Tasks are spread over worker processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.bfcl.configs import CONFIGS
from benchmarks.bfcl.data import Task, load_category
from benchmarks.bfcl.evaluate import labels
from benchmarks.bfcl.mutations import MUTATION_CLASSES, mutate
from benchmarks.bfcl.oracle import ground_truth_replay, reference, replay


@dataclass
class CallRecord:
    """One call of one trajectory under one configuration."""

    config: str
    method: str  # "ground_truth" or the mutation class
    task: str
    step: int
    tool: str
    backend: str | None  # the backend class owning the tool (None: unknown tool)
    env_rejected: bool
    before_execution: bool  # the guard flagged it before it ran
    dry_run: bool  # ... and that flag came from the fork dry-run
    check: str | None
    dry_run_outcome: str | None  # passed / rejected / guard_error; None: no dry run
    real_rejected: bool  # the guarded backend rejected the real execution that followed


@dataclass
class TaskResult:
    calls: list[CallRecord] = field(default_factory=list)


def _harnesses(configs: Sequence[str]) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider

    from benchmarks.bfcl.guarded import Harness

    return {c: Harness(TracerProvider(), config=c) for c in configs}


_WORKER: dict[str, Any] = {}


def _init(configs: Sequence[str]) -> None:
    _WORKER["harnesses"] = _harnesses(configs)


def run_task(task: Task, kinds: Sequence[str], seed: int) -> list[dict[str, Any]]:
    """Oracle plus every configuration, for the ground truth and each mutation of one task."""
    from benchmarks.bfcl.env import Environment

    harnesses: dict[str, Any] = _WORKER["harnesses"]
    owner = Environment(task).owner
    runs: list[tuple[str, list[Any], Any]] = [
        ("ground_truth", task.flat_calls(), ground_truth_replay(task))
    ]
    for kind in kinds:
        m = mutate(task, kind, seed)
        if m is not None:
            runs.append((kind, m.calls, replay(task, m.calls, reference(task))))
    out: list[dict[str, Any]] = []
    for method, calls, raw in runs:
        for key, harness in harnesses.items():
            traj = f"{task.id}/{method}/{key}"
            method_label = method if method == "ground_truth" else f"mutation:{method}"
            run = harness.run(task, calls, traj, labels(task, method_label, config=key))
            verdicts = {v.step: v for v in run.verdicts}
            for i, ((_, call), outcome) in enumerate(zip(calls, raw.outcomes, strict=True), 1):
                v = verdicts.get(i)
                out.append(
                    asdict(
                        CallRecord(
                            config=key,
                            method=method,
                            task=task.id,
                            step=i,
                            tool=call.name,
                            backend=owner.get(call.name),
                            env_rejected=outcome.rejected,
                            before_execution=bool(v and v.before_execution),
                            dry_run=bool(v and v.dry_run),
                            check=v.check if v is not None and not v.valid else None,
                            dry_run_outcome=v.dry_run_outcome if v is not None else None,
                            real_rejected=bool(v and v.real_rejected),
                        )
                    )
                )
    return out


def _job(job: tuple[str, int, tuple[str, ...], int]) -> list[dict[str, Any]]:
    category, index, kinds, seed = job
    return run_task(load_category(category)[index], kinds, seed)


def run_all(
    tasks: Sequence[Task],
    configs: Sequence[str] = tuple(CONFIGS),
    kinds: Sequence[str] = MUTATION_CLASSES,
    seed: int = 0,
    jobs: int = 2,
) -> list[dict[str, Any]]:
    """Every task's call records; ``jobs`` worker processes (1: in this process)."""
    index = {t.id: i for c in dict.fromkeys(t.category for t in tasks) for i, t in
             enumerate(load_category(c))}  # fmt: skip
    work = [(t.category, index[t.id], tuple(kinds), seed) for t in tasks]
    if jobs <= 1:
        _init(configs)
        return [r for w in work for r in _job(w)]
    with ProcessPoolExecutor(jobs, initializer=_init, initargs=(tuple(configs),)) as ex:
        return [r for rs in ex.map(_job, work, chunksize=4) for r in rs]
