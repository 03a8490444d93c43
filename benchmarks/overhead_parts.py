"""Where a guarded call's time goes, tracing off: each part of the pipeline added one at a time.

    python -m benchmarks.overhead_parts [--quick] [--rounds N] [--json out.json]

The cases differ by one thing each, measured interleaved in one run, so the difference of two
neighbours is what that thing costs per call; each part is printed as a fraction of
``validate_call``'s own overhead, the unit the overhead targets are written in:

- ``wrapt pass-through``: a wrapt wrapper that only calls the function (the dispatch every
  wrapper in the house style pays);
- ``schema only, no trajectory``: the guard validating the arguments, nothing else;
- ``schema only``: the same inside a trajectory (the step, the verdict kept, the nested-call
  mark);
- ``+ dependency``, ``+ precondition``, ``+ produces``: the workload's checks, one at a time.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable
from typing import Any

import pydantic
import wrapt
from opentelemetry import trace

import toolguard as tg

from . import _workload as w
from ._timing import Case, interleaved, median, overhead_ratios, quartiles, us, write_json

_OFF = trace.NoOpTracerProvider()
_DEPENDENCY = {"refs": {"account_id": "account_id"}}
_PRECONDITION = {
    "preconditions": [tg.Precondition("account_open", w.account_open, "the account is open")]
}
_PRODUCES = {"produces": {"receipt_id": "receipt"}}
STEPS: dict[str, dict[str, Any] | None] = {
    "schema only, no trajectory": None,
    "schema only": {},
    "+ dependency": _DEPENDENCY,
    "+ precondition": {**_DEPENDENCY, **_PRECONDITION},
    "+ produces": {**_DEPENDENCY, **_PRECONDITION, **_PRODUCES},
}


@wrapt.decorator
def _pass_through(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    return wrapped(*args, **kwargs)


def _loop(fn: Callable[..., Any]) -> Case:
    kwargs = w.ARGS

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in itertools.repeat(None, n):
            fn(**kwargs)
        return time.perf_counter() - start

    return run


def _in_trajectory(fn: Callable[..., Any]) -> Case:
    """Calls inside trajectories of 100, the account id bound (the dependency holds)."""
    kwargs = w.ARGS

    def run(n: int) -> float:
        elapsed = 0.0
        done = 0
        while done < n:
            k = min(100, n - done)
            with tg.trajectory(tracer_provider=_OFF) as traj:
                traj.bind("account_id", w.ACCOUNT)
                start = time.perf_counter()
                for _ in itertools.repeat(None, k):
                    fn(**kwargs)
                elapsed += time.perf_counter() - start
            done += k
        return elapsed

    return run


def cases() -> dict[str, Case]:
    out: dict[str, Case] = {
        "bare": _loop(w.transfer),
        "validate_call": _loop(pydantic.validate_call(w.transfer)),
        "wrapt pass-through": _loop(_pass_through(w.transfer)),
    }
    for name, options in STEPS.items():
        guard = tg.Guard(state=w.Bank(), tracer_provider=_OFF)
        fn = guard.register(w.transfer, **(options or {}))
        out[name] = _loop(fn) if options is None else _in_trajectory(fn)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=61)
    parser.add_argument("--n", type=int, default=2000, help="calls per case per round")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--quick", action="store_true", help="a tiny run that checks it works")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.n = 3, 200
    samples = interleaved(cases(), rounds=args.rounds, n=args.n)
    names = list(samples)
    print(f"{'case':34s} {'time/call':>10s} {'overhead':>10s} {'/ validate_call':>16s}")
    bare = median(samples["bare"])
    for name in names:
        t = median(samples[name])
        ratio = median(overhead_ratios(samples, name, "validate_call", "bare"))
        print(f"{name:34s} {us(t):>10s} {us(t - bare):>10s} {ratio:16.2f}")
    print("\neach part: its cost per call, as a fraction of validate_call's overhead")
    parts: dict[str, dict[str, float]] = {}
    chain = ["validate_call", *STEPS]
    rows = [("wrapt dispatch", "bare", "wrapt pass-through")]
    rows += [
        (f"{after} (vs {before})", before, after) for before, after in itertools.pairwise(chain)
    ]
    for label, before, after in rows:
        per_round = [
            a - b
            for a, b in zip(
                overhead_ratios(samples, after, "validate_call", "bare"),
                overhead_ratios(samples, before, "validate_call", "bare"),
                strict=True,
            )
        ]
        lo, hi = quartiles(per_round)
        parts[label] = {"median": median(per_round), "q1": lo, "q3": hi}
        print(f"  {label:48s} {median(per_round):+6.2f}   [{lo:+.2f} to {hi:+.2f}]")
    result = {"samples_median_us": {k: median(v) * 1e6 for k, v in samples.items()}}
    result["parts"] = parts  # type: ignore[assignment]
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
