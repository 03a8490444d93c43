"""What a fork dry-run costs per call on BFCL, next to the environment's own execution.

Over the ground-truth calls, per call: the backend method itself on the raw environment
(the environment's own execution: the arguments are built beforehand, as BFCL's eval has
them before the call), the fork strategy's ``fork`` + ``discard`` inside the guard, and the
guarded call with the dry run against the same guarded call without it (configuration
``fork`` against ``schema_deps``: the difference is what the dry run adds - the fork, the
call on the fork, the discard). The three runs of a task follow each other, so drift on a
shared machine hits them alike; medians, not means, are what to read.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._forkcost import TimedFork, summarise_costs
from benchmarks.bfcl.data import Task
from benchmarks.bfcl.env import Environment


def _raw_seconds(task: Task) -> list[tuple[str | None, float]]:
    env = Environment(task)
    out: list[tuple[str | None, float]] = []
    for _, call in task.flat_calls():
        method = env.methods.get(call.name)
        kwargs = copy.deepcopy(env.normalise(call))
        t0 = time.perf_counter()
        try:
            if method is not None:
                method(**kwargs)
        except Exception:  # the environment's rejection: timed all the same
            pass
        out.append((env.owner.get(call.name), time.perf_counter() - t0))
    return out


def measure(tasks: Sequence[Task], fork: Any = None) -> list[dict[str, Any]]:
    """One row per ground-truth call: backend, execution, fork, dry-run added (seconds)."""
    from opentelemetry.sdk.trace import TracerProvider

    from benchmarks.bfcl.guarded import Harness

    timed_fork = TimedFork(fork) if fork is not None else None
    with_fork = Harness(TracerProvider(), config="fork", fork=timed_fork, timed=True)
    if timed_fork is None:
        with_fork.fork = timed_fork = TimedFork(with_fork.fork)
    without = Harness(TracerProvider(), config="schema_deps", timed=True)
    rows: list[dict[str, Any]] = []
    for task in tasks:
        raw = _raw_seconds(task)
        for h in (with_fork, without):
            assert h.timings is not None
            h.timings.clear()
            h.run(task, task.flat_calls(), f"{task.id}/cost/{h.config.key}", {"task": task.id})
        assert with_fork.timings is not None and without.timings is not None
        for (backend, exec_s), (fork_call, fork_s, forks), (plain_call, _, _) in zip(
            raw, with_fork.timings, without.timings, strict=True
        ):
            rows.append(
                {
                    "task": task.id,
                    "backend": backend,
                    "long_context": task.long_context,
                    "exec_s": exec_s,
                    "fork_s": fork_s if forks else None,
                    "dry_run_added_s": fork_call - plain_call,
                }
            )
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians per backend class (long-context scenarios apart), and over all forked calls."""
    return summarise_costs(
        [r for r in rows if r["backend"] is not None and r["fork_s"] is not None],
        lambda r: r["backend"] + (" (long context)" if r["long_context"] else ""),
    )
