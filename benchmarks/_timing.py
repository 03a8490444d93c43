"""Interleaved timing: every case runs once per round in a shuffled order, and figures are
medians over rounds. On a shared, noisy machine absolute times drift between runs; ratios of
cases measured side by side, round by round, hold."""

from __future__ import annotations

import gc
import json
import random
import statistics
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# A case runs `n` operations and returns the seconds they took (it may leave set-up out).
Case = Callable[[int], float]


def interleaved(
    cases: Mapping[str, Case],
    *,
    rounds: int,
    n: int,
    seed: int = 0,
    divide: Mapping[str, int] | None = None,
) -> dict[str, list[float]]:
    """Seconds per operation of each case, one sample per round. ``divide`` runs a slow case
    n // k times per round, so one slow alternative does not stretch every round."""
    divide = divide or {}
    rng = random.Random(seed)
    names = list(cases)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm-up: first-call costs (imports, caches) stay out of the figures
        cases[name](max(1, n // 10 // divide.get(name, 1)))
    for _ in range(rounds):
        rng.shuffle(names)
        gc.collect()
        for name in names:
            k = max(1, n // divide.get(name, 1))
            samples[name].append(cases[name](k) / k)
    return samples


def median(values: list[float]) -> float:
    return statistics.median(values)


def overhead_ratios(
    samples: Mapping[str, list[float]], case: str, reference: str, bare: str
) -> list[float]:
    """Per round: (case - bare) / (reference - bare), all three from the same round."""
    ratios = []
    for c, r, b in zip(samples[case], samples[reference], samples[bare], strict=True):
        if r - b > 0:
            ratios.append((c - b) / (r - b))
    return ratios


def overhead_ratio(
    samples: Mapping[str, list[float]], case: str, reference: str, bare: str
) -> float:
    """Median over rounds of the per-round overhead ratio."""
    ratios = overhead_ratios(samples, case, reference, bare)
    return statistics.median(ratios) if ratios else float("nan")


def quartiles(values: list[float]) -> tuple[float, float]:
    """The spread of per-round ratios (25th and 75th percentiles): how noisy the run was."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def time_ratio(samples: Mapping[str, list[float]], case: str, reference: str) -> float:
    """Median over rounds of case / reference."""
    return statistics.median(
        c / r for c, r in zip(samples[case], samples[reference], strict=True) if r > 0
    )


def us(seconds: float) -> str:
    return f"{seconds * 1e6:9.2f} us"


def write_json(path: str | None, payload: Mapping[str, Any]) -> None:
    if path:
        Path(path).write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def print_targets(targets: Mapping[str, bool]) -> None:
    """The closing list every benchmark prints: each target, met or MISSED."""
    print("\ntargets:")
    for name, ok in targets.items():
        print(f"  {'met   ' if ok else 'MISSED'} {name}")
