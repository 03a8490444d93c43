"""Does a call cost more late in a long trajectory, or in a guard holding many tools?"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from opentelemetry import trace

import toolguard as tg

from . import _workload as w
from ._timing import Case, interleaved, quartiles

RECENT = 10  # most quotes are of one of the last 10 answers...
LOOK_BACK = 0.25  # ... and one in four of any earlier answer


def growth(depth: int, rounds: int, window: int = 10, uniform: bool = False) -> dict[str, Any]:
    """Time of a call near step 10 and near step ``depth`` of a trajectory, interleaved.

    The tool declares every check kind (``_workload.growth_tool``). Each call produces a new
    receipt (a binding) and answers in free text (a text the information check searches);
    its grounded ``memo`` quotes the receipt of a uniformly drawn earlier call of the same
    trajectory ("receipt r-41"), found only inside that call's answer: the substring search
    over everything seen so far, which used to scan the whole history at every call.

    Each round fills one trajectory to step ``depth - window`` (untimed), then times
    ``window`` calls on it (steps up to ``depth``) alternately with ``window`` calls on a
    fresh trajectory (steps 5 to 14), so the machine's load weighs on both alike.
    """
    off = trace.NoOpTracerProvider()
    guard = tg.Guard(state=w.Bank(), tracer_provider=off)
    pay, options, _ = w.growth_tool()
    fn = guard.register(pay, **options)
    early: list[float] = []
    late: list[float] = []
    ratios: list[float] = []
    for r in range(rounds + 1):
        rng = random.Random(r)
        long, short = _Run(fn, rng, uniform), _Run(fn, rng, uniform)
        for _ in range(depth - window):
            long.call()
        for _ in range(4):
            short.call()
        a, b = [], []
        for _ in range(window):
            a.append(short.call())
            b.append(long.call())
        long.end()
        short.end()
        early.append(statistics.median(a))
        late.append(statistics.median(b))
        ratios.append(late[-1] / early[-1])
    # The first round warms caches; drop it.
    return {
        "call_10": statistics.median(early[1:]),
        "call_last": statistics.median(late[1:]),
        "ratio": statistics.median(ratios[1:]),
        "per_round": quartiles(ratios[1:]),
        "bindings": float(depth),
    }


class _Run:
    """One trajectory of the growth run, made current only around its own calls."""

    def __init__(self, fn: Any, rng: random.Random, uniform: bool = False) -> None:
        self.fn, self.rng, self.uniform = fn, rng, uniform
        self.traj = tg.trajectory(
            tracer_provider=trace.NoOpTracerProvider(), user_input=w.USER_INPUT
        ).start()
        self.traj.bind("account_id", w.ACCOUNT)
        self.receipts: list[str] = []

    def call(self) -> float:
        receipts, rng = self.receipts, self.rng
        if not receipts:
            memo = "the rent"
        elif self.uniform or rng.random() < LOOK_BACK:
            memo = f"receipt {rng.choice(receipts)}"  # anywhere in the history
        else:
            memo = f"receipt {rng.choice(receipts[-RECENT:])}"  # one it has just read
        args = {"account_id": w.ACCOUNT, "amount": 12.5, "memo": memo}
        with self.traj.activate():
            start = time.perf_counter()
            result = self.fn(**args)
            elapsed = time.perf_counter() - start
        self.receipts.append(result.rsplit(" ", 2)[1])  # "...; receipt r-17 issued."
        return elapsed

    def end(self) -> None:
        assert self.traj.first_error_depth == self.traj.length + 1, "every call is valid"
        self.traj.end()


MISSPELT = "trasnfer"  # one call in MISSPELT_EVERY is to this name


def dispatch(many: int, rounds: int, n: int) -> dict[str, list[float]]:
    """guard.call by name in a guard of 10 tools and in one of ``many`` tools, interleaved;
    one call in ten names a tool that does not exist (a misspelling: the rejection suggests
    the closest names)."""
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
        {
            "10 tools": by_name(guards[10], off, misspelt=True),
            f"{many} tools": by_name(guards[many], off, misspelt=True),
        },
        rounds=rounds,
        n=n,
    )


MISSPELT_EVERY = 10


def by_name(guard: Any, provider: Any, *, misspelt: bool = False) -> Case:
    """Dispatch by name in trajectories of 100 calls each, the bound value given up front;
    ``misspelt``: every tenth call names a tool that does not exist."""
    names = ["transfer"] * 100
    if misspelt:
        names[MISSPELT_EVERY - 1 :: MISSPELT_EVERY] = [MISSPELT] * (100 // MISSPELT_EVERY)

    def run(k: int) -> float:
        elapsed = 0.0
        for i in range(0, k, 100):
            with tg.trajectory(tracer_provider=provider) as traj:
                traj.bind("account_id", w.ACCOUNT)
                start = time.perf_counter()
                for name in names[: min(100, k - i)]:
                    guard.call(name, w.ARGS)
                elapsed += time.perf_counter() - start
        return elapsed

    return run
