"""Timing a fork strategy inside the guard (issue 15's cost columns, BFCL and tau2)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import toolguard as tg

T = TypeVar("T")


class TimedFork:
    """Wraps a fork strategy and adds up the time its fork() and discard() (or keep(), for a
    transactional strategy) take. It is in place and transactional when ``inner`` is."""

    def __init__(self, inner: Any, tally: list[float] | None = None) -> None:
        self.inner = inner
        self.tally = tally if tally is not None else [0.0, 0]  # seconds, forks
        self.in_place = getattr(inner, "in_place", False) is True
        if callable(getattr(inner, "keep", None)):
            self.keep = self._keep

    def alongside(self, inner: Any) -> TimedFork:
        """A TimedFork over ``inner`` whose time and forks count in this one's take()."""
        return TimedFork(inner, self.tally)

    def _keep(self, forked: Any) -> None:
        self._timed(self.inner.keep, forked)

    def fork(self, state: Any) -> Any:
        self.tally[1] += 1
        return self._timed(self.inner.fork, state)

    def discard(self, forked: Any) -> None:
        self._timed(self.inner.discard, forked)

    def _timed(self, method: Callable[[Any], Any], arg: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return method(arg)
        finally:
            self.tally[0] += time.perf_counter() - t0

    def take(self) -> tuple[float, int]:
        """Time and number of forks since the last take()."""
        seconds, count = self.tally
        self.tally[:] = [0.0, 0]
        return seconds, int(count)


def _nothing(_: Any) -> None:
    return None


def no_op_transaction() -> tg.CallbackFork:
    """A transactional strategy that journals nothing: for a tool that changes nothing, its
    call is its own dry run; beside real strategies, the floor of any transactional one."""
    return tg.CallbackFork(_nothing, _nothing, in_place=True, keep=_nothing)


REPEATS = 3  # runs of each task per column; each call's fastest is kept (fastest())


def fastest(runs: Sequence[Sequence[T]], seconds: Callable[[T], float] | None = None) -> list[T]:
    """Call by call, the fastest of several runs of the same calls: each run a list of one
    item per call, ``seconds(item)`` its time (default: the item itself)."""
    key = seconds or (lambda x: x)
    return [min(per_call, key=key) for per_call in zip(*runs, strict=True)]


def transactional(strategy: Any) -> bool:
    """In place and able to keep: the call runs once (docs/fork-and-plans.md)."""
    return getattr(strategy, "in_place", False) is True and callable(
        getattr(strategy, "keep", None)
    )


def median_us(values: Sequence[float]) -> float | None:
    """The median of durations in seconds, in microseconds (None when there are none)."""
    return round(statistics.median(values) * 1e6, 1) if values else None


def summarise_costs(
    rows: Sequence[dict[str, Any]],
    group: Callable[[dict[str, Any]], str],
    *,
    transactional: bool = False,
) -> dict[str, dict[str, Any]]:
    """Per group and over all rows (``all``): calls, median execution, fork + discard (or
    keep) and dry-run added per call (us), their ratio, and how many calls forked cheaper
    than they executed. Rows: ``exec_s``, ``fork_s``, ``dry_run_added_s`` (seconds), and
    optionally ``executor_s`` (the benchmark's own executor around the call, BFCL's).
    ``transactional``: the strategy runs the call once (fork.py), not twice."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(group(r), []).append(r)
    groups = dict(sorted(groups.items()))
    groups["all"] = list(rows)

    def stats(g: list[dict[str, Any]]) -> dict[str, Any]:
        exec_us = median_us([r["exec_s"] for r in g])
        fork_us = median_us([r["fork_s"] for r in g])
        out = {
            "calls": len(g),
            "exec_us": exec_us,
            "fork_us": fork_us,
            "dry_run_added_us": median_us([r["dry_run_added_s"] for r in g]),
            "fork_over_exec": round(fork_us / exec_us, 2) if exec_us and fork_us else None,
            "calls_fork_cheaper": sum(r["fork_s"] < r["exec_s"] for r in g),
            "transactional": transactional,
        }
        executor = [r["executor_s"] for r in g if r.get("executor_s") is not None]
        if executor:
            out["executor_us"] = median_us(executor)
        return out

    return {k: stats(g) for k, g in groups.items() if g}
