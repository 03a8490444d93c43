"""Does a call cost more late in a long trajectory, or in a guard holding many tools?"""

from __future__ import annotations

import statistics
import time
from typing import Any

from opentelemetry import trace

import toolguard as tg

from . import _workload as w
from ._timing import Case, interleaved


def growth(depth: int, rounds: int, window: int = 10) -> dict[str, float]:
    """Median time of calls near step 10 and near step ``depth`` of the same trajectory.

    The tool produces a new bound value on every call, so the trajectory's state (bindings)
    grows with its length, as it does in an agent that keeps creating things.
    """
    off = trace.NoOpTracerProvider()
    guard = tg.Guard(state=w.Bank(), tracer_provider=off)
    fn = guard.register(
        w.receipts(), name="transfer", produces={"receipt_id": "receipt"}, **w.tool_options()
    )
    early: list[float] = []
    late: list[float] = []
    ratios: list[float] = []
    lo, hi = 10 - window // 2, depth - window + 1  # steps [5, 15) and (depth - 10, depth]
    for _ in range(rounds + 1):
        times = []
        with tg.trajectory(tracer_provider=off) as traj:
            traj.bind("account_id", w.ACCOUNT)
            for _ in range(depth):
                start = time.perf_counter()
                fn(**w.ARGS)
                times.append(time.perf_counter() - start)
        a = statistics.median(times[lo - 1 : lo - 1 + window])
        b = statistics.median(times[hi - 1 : hi - 1 + window])
        early.append(a)
        late.append(b)
        ratios.append(b / a)
    # The first round warms caches; drop it.
    return {
        "call_10": statistics.median(early[1:]),
        "call_last": statistics.median(late[1:]),
        "ratio": statistics.median(ratios[1:]),
        "bindings": float(depth),
    }


def dispatch(many: int, rounds: int, n: int) -> dict[str, list[float]]:
    """guard.call by name in a guard of 10 tools and in one of ``many`` tools, interleaved."""
    off = trace.NoOpTracerProvider()
    guards = {}
    for size in (10, many):
        guard = tg.Guard(state=w.Bank(), tracer_provider=off)
        guard.register(w.transfer, **w.tool_options())
        # Fillers share one schema source (a JSON Schema): building `many` pydantic models
        # would only slow the set-up, not the dispatch being measured.
        schema = {"type": "object", "properties": {"q": {"type": "string"}}}
        for i in range(size - 1):
            guard.register(w.transfer, name=f"tool_{i:05d}", json_schema=schema)
        guards[size] = guard
    assert len(guards[many].tool_names) == many

    return interleaved(
        {"10 tools": by_name(guards[10], off), f"{many} tools": by_name(guards[many], off)},
        rounds=rounds,
        n=n,
    )


def by_name(guard: Any, provider: Any) -> Case:
    """Dispatch by name in trajectories of 100 calls each, the bound value given up front."""

    def run(k: int) -> float:
        elapsed = 0.0
        for i in range(0, k, 100):
            with tg.trajectory(tracer_provider=provider) as traj:
                traj.bind("account_id", w.ACCOUNT)
                start = time.perf_counter()
                for _ in range(min(100, k - i)):
                    guard.call("transfer", w.ARGS)
                elapsed += time.perf_counter() - start
        return elapsed

    return run
