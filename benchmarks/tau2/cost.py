"""What a fork dry-run costs per call on tau2, next to tau2's own execution of the call.

Over the ground-truth calls, per call: ``Environment.get_response`` on tau2's own fresh
environment (its execution: the tool, the database change, the JSON answer), the fork
strategy's ``fork`` + ``discard`` (or ``keep``) inside the guard, and the guarded call with
the dry run against the same call without it (configuration ``fork`` against
``schema_deps``). Medians.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from benchmarks._forkcost import REPEATS, TimedFork, fastest, summarise_costs, transactional
from benchmarks.tau2._tau2 import fresh_environment, tool_call
from benchmarks.tau2.compare import guarded_steps, undo_fork
from benchmarks.tau2.tasks import GroundTruth


def _exec_seconds(task: GroundTruth) -> list[float]:
    env = fresh_environment(task.domain)
    out = []
    for i, c in enumerate(task.calls, start=1):
        message = tool_call(c.name, c.arguments, f"call-{i}")
        t0 = time.perf_counter()
        env.get_response(message)
        out.append(time.perf_counter() - t0)
    return out


def _guarded_seconds(
    task: GroundTruth, config: str, fork: Any = None
) -> list[tuple[float, float, int]]:
    """Per call: the guarded call's seconds, and the fork's (seconds, forks) when timed. On
    tau2's own fresh environment, as the execution: a copy-on-read one would add its first
    reads' copies (a search reads every flight) to the timings."""
    calls: list[float] = []
    forks: list[tuple[float, int]] = []
    if fork is not None:
        fork.take()
    guarded_steps(
        task,
        config,
        "cost",
        fork=fork,
        timings=calls,
        after=forks if fork is not None else None,
        environment=fresh_environment(task.domain),
    )
    if fork is None:
        forks = [(0.0, 0)] * len(calls)
    return [(c, s, n) for c, (s, n) in zip(calls, forks, strict=True)]


def measure(
    tasks: Sequence[GroundTruth], fork: Any = None, repeats: int = REPEATS
) -> list[dict[str, Any]]:
    """One row per ground-truth call: domain, execution, fork, dry-run added (seconds); each
    column the call's fastest of ``repeats`` runs (see ``benchmarks/bfcl/cost.py``)."""
    timed = TimedFork(fork if fork is not None else undo_fork())
    once = transactional(timed.inner)
    rows: list[dict[str, Any]] = []
    for task in tasks:
        execs = fastest([_exec_seconds(task) for _ in range(repeats)])
        with_fork = fastest(
            [_guarded_seconds(task, "fork", timed) for _ in range(repeats)], itemgetter(0)
        )
        plain = fastest(
            [_guarded_seconds(task, "schema_deps") for _ in range(repeats)], itemgetter(0)
        )
        for exec_s, (fork_call, fork_s, n), (plain_call, _, _) in zip(
            execs, with_fork, plain, strict=True
        ):
            rows.append(
                {
                    "task": task.key,
                    "domain": task.domain,
                    "exec_s": exec_s,
                    "transactional": once,
                    "fork_s": fork_s if n else None,
                    "dry_run_added_s": fork_call - plain_call,
                }
            )
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return summarise_costs(
        [r for r in rows if r["fork_s"] is not None],
        lambda r: r["domain"],
        transactional=any(r["transactional"] for r in rows),
    )
