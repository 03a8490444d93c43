"""What a fork dry-run costs per call on BFCL, next to the environment's own execution.

Over the ground-truth calls, per call: the backend method itself on the raw environment
(the environment's own execution: the arguments are built beforehand, as BFCL's eval has
them before the call), BFCL's own executor of the call (``execute_multi_turn_func_call`` on
the turn's call strings, as BFCL's evaluation runs them: each string evaluated, the answer
rendered; a turn's time divided among its calls), the fork strategy's ``fork`` + ``discard``
(or ``keep``) inside the guard, and the
guarded call with the dry run against the same guarded call without it (configuration
``fork`` against ``schema_deps``: the difference is what the dry run adds - the fork, the
call on the fork, the discard). The three runs of a task follow each other, so drift on a
shared machine hits them alike; medians, not means, are what to read.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from benchmarks._forkcost import REPEATS, TimedFork, fastest, summarise_costs, transactional
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


def render(call: Any) -> str:
    """A parsed call as BFCL's call string (its arguments are literals: repr is the source)."""
    parts = [repr(a) for a in call.args] + [f"{k}={v!r}" for k, v in call.kwargs.items()]
    return f"{call.name}({', '.join(parts)})"


def _executor_seconds(task: Task, run: int) -> list[float]:
    """Per ground-truth call, BFCL's own executor: the turn's strings through
    ``execute_multi_turn_func_call`` on instances made beforehand (as from its second turn
    on), the turn's time shared equally among its calls."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils as bfcl

    model, entry = "toolguard_cost", f"{task.id}_{run}"
    args = (task.initial_config, task.involved_classes, model, entry, task.long_context)
    bfcl.execute_multi_turn_func_call([], *args)  # creates the instances
    out: list[float] = []
    try:
        for turn in task.ground_truth:
            if not turn:
                continue
            strings = [render(c) for c in turn]
            t0 = time.perf_counter()
            bfcl.execute_multi_turn_func_call(strings, *args)
            out += [(time.perf_counter() - t0) / len(strings)] * len(strings)
    finally:  # BFCL keeps its instances in its module's globals
        for name in [n for n in vars(bfcl) if n.startswith(f"{model}_")]:
            delattr(bfcl, name)
    return out


def measure(
    tasks: Sequence[Task], fork: Any = None, repeats: int = REPEATS
) -> list[dict[str, Any]]:
    """One row per ground-truth call: backend, execution, fork, dry-run added (seconds).

    Every column is the call's fastest of ``repeats`` runs (a task's runs follow each other):
    on a shared machine one run's time carries whatever else ran meanwhile (another process,
    a garbage collection), and the fastest is the call's own cost, as ``timeit`` reports it.
    """
    from opentelemetry.sdk.trace import TracerProvider

    from benchmarks.bfcl.guarded import Harness

    timed_fork = TimedFork(fork) if fork is not None else None
    with_fork = Harness(TracerProvider(), config="fork", fork=timed_fork, timed=True)
    if timed_fork is None:
        with_fork.fork = timed_fork = TimedFork(with_fork.fork)
    without = Harness(TracerProvider(), config="schema_deps", timed=True)
    rows: list[dict[str, Any]] = []
    once = transactional(timed_fork.inner)
    for run, task in enumerate(tasks):
        raw = fastest([_raw_seconds(task) for _ in range(repeats)], itemgetter(1))
        executor = fastest([_executor_seconds(task, run * repeats + r) for r in range(repeats)])
        guarded: dict[str, list[tuple[float, float, int]]] = {}
        for h in (with_fork, without):
            timings: list[list[tuple[float, float, int]]] = []
            for _ in range(repeats):
                assert h.timings is not None
                h.timings.clear()
                trajectory = f"{task.id}/cost/{h.config.key}"
                h.run(task, task.flat_calls(), trajectory, {"task": task.id})
                timings.append(list(h.timings))
            guarded[h.config.key] = fastest(timings, itemgetter(0))
        for (backend, exec_s), executor_s, (fork_call, fork_s, forks), (plain_call, _, _) in zip(
            raw,
            executor,
            guarded[with_fork.config.key],
            guarded[without.config.key],
            strict=True,
        ):
            rows.append(
                {
                    "task": task.id,
                    "backend": backend,
                    "long_context": task.long_context,
                    "exec_s": exec_s,
                    "executor_s": executor_s,
                    "transactional": once,
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
        transactional=any(r["transactional"] for r in rows),
    )
