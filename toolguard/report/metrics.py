"""Prefix-executability metrics over a cohort of trajectories (docs/protocol.md sections 3 and 5).

Records in, one plain dict out: the dict is exactly the per-group object of the JSON report,
so notebooks, tests and the CLI all read the same figures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from .._contract import CAUSES

DEFAULT_SEED = 20261014
DEFAULT_RESAMPLES = 1000
UNKNOWN_CAUSE = "unknown"
_Z95 = 1.959963984540054  # two-sided 95% normal quantile
_BOOTSTRAP_CELLS = 1 << 20  # resampled counts held at once (8 MB), whatever the cohort

Interval = list[float]
"""A 95% interval ``[lo, hi]`` (a list, as it is written to the JSON report)."""


class Intervals(TypedDict):
    """The ``ci`` object of one group: an interval per estimate, None when n = 0."""

    ter: Interval | None
    final_success: Interval | None
    rr: Interval | None
    s: Interval | None
    auc_pec: Interval | None
    mean_fed: Interval | None


class Metrics(TypedDict):
    """The docs/protocol.md section 5 fields of one cohort (a group without its ``labels``)."""

    n: int
    ter: float | None
    mean_fed: float | None
    auc_pec: float | None
    n_empty: int
    pec: list[float]
    pec_elig: list[float | None]
    n_at_depth: list[int]
    final_success: float | None
    n_outcome_known: int
    rr: float | None
    rr_eligible: int
    s: float | None
    causes: dict[str, int]
    ci: Intervals
    incomplete: int
    disagreements: int
    n_executable: int
    n_success: int
    s_eligible: int


@dataclass(frozen=True, slots=True)
class TrajectoryRecord:
    """One trajectory as the metrics see it.

    ``length`` is T (calls emitted, blocked ones included), ``fed`` the first-error depth
    (``length + 1`` when every call was valid), ``success`` the outcome Y (None = unknown).
    ``incomplete`` says T and FED came from call spans because no summary span was found;
    ``disagreements`` lists where call spans and summary did not agree.

    Two diagnostics of the reading, None when not known (records built by hand), and left out
    of comparisons (they describe the input, not the trajectory's figures): ``call_spans``,
    the call spans read for this trajectory (a span read twice counts twice), and
    ``summary_spans``, the distinct summary spans read (more than one: runs appended to one
    file under the same ids?)."""

    trajectory_id: str
    length: int
    fed: int
    first_error_cause: str | None = None
    success: bool | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    incomplete: bool = False
    disagreements: tuple[str, ...] = ()
    call_spans: int | None = field(default=None, compare=False)
    summary_spans: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.length < 0 or not 1 <= self.fed <= self.length + 1:
            raise ValueError(
                f"trajectory {self.trajectory_id!r}: need T >= 0 and 1 <= FED <= T + 1, "
                f"got T={self.length}, FED={self.fed}"
            )

    @property
    def executable(self) -> bool:
        """Every call valid (FED = T + 1)."""
        return self.fed == self.length + 1


def wilson(successes: int, n: int, z: float = _Z95) -> Interval | None:
    """Wilson score interval for a proportion; None when there is nothing to estimate from."""
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Clamp: rounding can push the bounds a hair outside [0, 1] at p = 0 or 1.
    return [max(0.0, centre - half), min(1.0, centre + half)]


def bootstrap_mean_ci(
    values: Sequence[float], *, seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES
) -> Interval | None:
    """Percentile 95% interval of the mean, resampling ``values`` with replacement."""
    n = len(values)
    if n == 0:
        return None
    arr = np.asarray(values, dtype=float)
    if n == 1 or resamples < 1 or float(arr.min()) == float(arr.max()):
        v = float(arr.mean())
        return [v, v]
    rng = np.random.default_rng(seed)
    # Resampling n values with replacement is drawing how often each *distinct* value comes
    # up: multinomial counts over the distinct values, weighted by their frequencies. FED and
    # AUC terms take few distinct values, so this costs resamples x distinct, not
    # resamples x n (10,000 trajectories: milliseconds instead of a tenth of a second).
    distinct, freq = np.unique(arr, return_counts=True)
    # In blocks of rows: a cohort whose values are all distinct (a hostile file can make 10^5
    # of them) would otherwise be a resamples x distinct matrix of counts, 800 MB. The rows are
    # drawn in the same order either way, so the interval does not depend on the block size.
    rows = max(1, _BOOTSTRAP_CELLS // len(distinct))
    means = np.empty(resamples)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        means[start:stop] = rng.multinomial(n, freq / n, size=stop - start) @ distinct / n
    lo, hi = np.quantile(means, [0.025, 0.975])
    return [float(lo), float(hi)]


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def compute_metrics(
    records: Iterable[TrajectoryRecord],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Metrics:
    """The docs/protocol.md section 5 fields for one cohort (without ``labels``).

    Proportions get 95% Wilson intervals; ``auc_pec`` and ``mean_fed`` a percentile bootstrap
    over trajectories, seeded so the same input always prints the same interval."""
    recs = list(records)
    n = len(recs)
    max_t = max((r.length for r in recs), default=0)
    # survive[k] counts T >= k and FED > k; at_depth[k] counts T >= k (index 0 unused).
    # Built from per-trajectory end points with a difference array: O(N + K), not O(N * K).
    at_depth = [0] * (max_t + 2)
    survive = [0] * (max_t + 2)
    n_exec = n_outcome = n_success = rr_elig = rr_succ = s_known = s_succ = 0
    causes: dict[str, int] = dict.fromkeys(CAUSES, 0)
    feds: list[float] = []
    aucs: list[float] = []
    for r in recs:
        at_depth[r.length] += 1
        survive[min(r.fed - 1, r.length)] += 1
        feds.append(r.fed)
        if r.length:
            aucs.append((r.fed - 1) / r.length)
        known = r.success is not None
        if known:
            n_outcome += 1
            n_success += r.success is True
        if r.executable:
            n_exec += 1
            if known:
                s_known += 1
                s_succ += r.success is True
        else:
            cause = r.first_error_cause if r.first_error_cause in causes else UNKNOWN_CAUSE
            causes[cause] = causes.get(cause, 0) + 1
            if known:
                rr_elig += 1
                rr_succ += r.success is True
    for k in range(max_t - 1, 0, -1):  # suffix sums: #{T >= k}, #{min(FED-1, T) >= k}
        at_depth[k] += at_depth[k + 1]
        survive[k] += survive[k + 1]
    n_at_depth = at_depth[1 : max_t + 1]
    surv = survive[1 : max_t + 1]
    return {
        "n": n,
        "ter": _ratio(n_exec, n),
        "mean_fed": sum(feds) / n if n else None,
        "auc_pec": math.fsum(aucs) / len(aucs) if aucs else None,
        "n_empty": n - len(aucs),
        "pec": [s / n for s in surv],
        "pec_elig": [_ratio(s, d) for s, d in zip(surv, n_at_depth, strict=True)],
        "n_at_depth": n_at_depth,
        "final_success": _ratio(n_success, n_outcome),
        "n_outcome_known": n_outcome,
        "rr": _ratio(rr_succ, rr_elig),
        "rr_eligible": rr_elig,
        "s": _ratio(s_succ, s_known),
        "causes": causes,
        "ci": {
            "ter": wilson(n_exec, n),
            "final_success": wilson(n_success, n_outcome),
            "rr": wilson(rr_succ, rr_elig),
            "s": wilson(s_succ, s_known),
            "auc_pec": bootstrap_mean_ci(aucs, seed=seed, resamples=resamples),
            "mean_fed": bootstrap_mean_ci(feds, seed=seed, resamples=resamples),
        },
        "incomplete": sum(r.incomplete for r in recs),
        "disagreements": sum(bool(r.disagreements) for r in recs),
        # Not in the section 5 example, added (the keys are open for additions): the counts
        # behind the proportions, so a reader can recompute any interval.
        "n_executable": n_exec,
        "n_success": n_success,
        "s_eligible": s_known,
    }


def wilson_band(counts: Sequence[int], totals: Sequence[int]) -> list[Interval | None]:
    """Wilson interval per depth, e.g. for PEC (totals = N) or PEC-eligible (n_at_depth)."""
    return [wilson(c, t) for c, t in zip(counts, totals, strict=True)]
