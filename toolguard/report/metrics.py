"""Prefix-executability metrics over a cohort of trajectories (docs/protocol.md sections 3 and 5).

Records in, one plain dict out: the dict is exactly the per-group object of the JSON report,
so notebooks, tests and the CLI all read the same figures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TypedDict

import numpy as np
import numpy.typing as npt

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
class FirstError:
    """The first failing call of a trajectory as its call span described it: the tool, the
    failed check's id, the developer message, and the arguments and result only where the
    guard recorded them (``record_content=True``), cut to ``CONTENT_CUT`` characters."""

    tool: str | None = None
    check: str | None = None
    message: str | None = None
    arguments: str | None = None
    result: str | None = None


CONTENT_CUT = 200
"""Longest recorded argument or result text kept per first failing call (the HTML table)."""


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
    # Cost (read only when asked for: report/cost.py), also left out of comparisons: the
    # tokens of the model calls attributed to this trajectory (None: no model span), and the
    # summed durations of its call spans in ns (None: no call span).
    input_tokens: int | None = field(default=None, compare=False)
    output_tokens: int | None = field(default=None, compare=False)
    tool_ns: int | None = field(default=None, compare=False)
    # What the HTML report's trajectory table shows of the first failing call (also left out
    # of comparisons: they describe the call, not the figures): None when the call span did
    # not carry it. ``first_error_content`` is the call's recorded arguments and result
    # (only present when the guard recorded content, ``record_content=True``), truncated.
    first_error: FirstError | None = field(default=None, compare=False)

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
    if not values:
        return None
    distinct, freq = np.unique(np.asarray(values, dtype=float), return_counts=True)
    return bootstrap_counts_ci(distinct, freq, seed=seed, resamples=resamples)


def bootstrap_counts_ci(
    distinct: npt.NDArray[np.float64],
    freq: npt.NDArray[np.int64],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Interval | None:
    """``bootstrap_mean_ci`` of the values ``distinct`` (sorted, each once) seen ``freq`` times
    each: the same interval, from counts alone (what the SQL report gets from the server)."""
    n = int(freq.sum())
    if n == 0:
        return None
    if len(distinct) == 1:
        v = float(distinct[0])
        return [v, v]
    if resamples < 1:
        v = float(_exact_sum(distinct.tolist(), freq.tolist()) / n)  # the mean, rounded once
        return [v, v]
    rng = np.random.default_rng(seed)
    # Resampling n values with replacement is drawing how often each *distinct* value comes
    # up: multinomial counts over the distinct values, weighted by their frequencies. FED and
    # AUC terms take few distinct values, so this costs resamples x distinct, not
    # resamples x n (10,000 trajectories: milliseconds instead of a tenth of a second).
    # In blocks of rows: a cohort whose values are all distinct (a hostile file can make 10^5
    # of them) would otherwise be a resamples x distinct matrix of counts, 800 MB. The rows are
    # drawn in the same order either way, so the interval does not depend on the block size.
    rows = max(1, _BOOTSTRAP_CELLS // len(distinct))
    means = np.empty(resamples)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        means[start:stop] = rng.multinomial(n, freq / n, size=stop - start) @ distinct / n
    lo, hi = np.quantile(means, [0.025, 0.975])
    # A resampled mean is rounded (three 0.8s average to 0.8000000000000002): no mean of
    # these values lies outside their range, so neither does the interval.
    first, last = float(distinct[0]), float(distinct[-1])
    return [min(max(float(lo), first), last), min(max(float(hi), first), last)]


def _exact_sum(values: Iterable[float], counts: Iterable[int]) -> Fraction:
    """The exact sum of ``values`` repeated ``counts`` times. ``float()`` of it is what
    ``math.fsum`` of the repeated values gives (both round the exact sum once), without
    repeating them."""
    return sum((Fraction(v) * c for v, c in zip(values, counts, strict=True)), Fraction(0))


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


@dataclass
class CohortCounts:
    """What every figure of one cohort is computed from: counts, the per-depth counts and how
    often each FED and each (FED - 1, T) pair occurs. The Python report counts them from
    records (``count_records``), the SQL report gets them from the server; both then go
    through ``metrics_from_counts``, so the two print the same figures."""

    n: int = 0
    n_executable: int = 0
    n_outcome_known: int = 0
    n_success: int = 0
    rr_eligible: int = 0
    rr_success: int = 0
    s_eligible: int = 0
    s_success: int = 0
    incomplete: int = 0
    disagreements: int = 0
    causes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0))
    """First-error causes over FED <= T: the five causes, then ``unknown`` when there are any."""
    n_at_depth: list[int] = field(default_factory=list)
    """``n_at_depth[k - 1]`` = #{T >= k}, k = 1 .. K (the largest T)."""
    survive: list[int] = field(default_factory=list)
    """``survive[k - 1]`` = #{T >= k and FED > k}, k = 1 .. K."""
    feds: dict[int, int] = field(default_factory=dict)
    """FED -> number of trajectories."""
    aucs: dict[tuple[int, int], int] = field(default_factory=dict)
    """(FED - 1, T) -> number of trajectories, over T >= 1."""

    def add_cause(self, cause: str | None, count: int = 1) -> None:
        key = cause if cause in CAUSES else UNKNOWN_CAUSE
        self.causes[key] = self.causes.get(key, 0) + count


def count_records(records: Iterable[TrajectoryRecord]) -> CohortCounts:
    """The ``CohortCounts`` of a cohort of records."""
    c = CohortCounts()
    lengths: dict[int, int] = {}
    survive: dict[int, int] = {}
    for r in records:
        c.n += 1
        lengths[r.length] = lengths.get(r.length, 0) + 1
        edge = min(r.fed - 1, r.length)
        survive[edge] = survive.get(edge, 0) + 1
        c.feds[r.fed] = c.feds.get(r.fed, 0) + 1
        if r.length:
            key = (r.fed - 1, r.length)
            c.aucs[key] = c.aucs.get(key, 0) + 1
        known = r.success is not None
        if known:
            c.n_outcome_known += 1
            c.n_success += r.success is True
        if r.executable:
            c.n_executable += 1
            if known:
                c.s_eligible += 1
                c.s_success += r.success is True
        else:
            c.add_cause(r.first_error_cause)
            if known:
                c.rr_eligible += 1
                c.rr_success += r.success is True
        c.incomplete += r.incomplete
        c.disagreements += bool(r.disagreements)
    c.n_at_depth = depth_counts(lengths)
    c.survive = depth_counts(survive, len(c.n_at_depth))
    return c


def depth_counts(ends: Mapping[int, int], depths: int | None = None) -> list[int]:
    """From how many trajectories end at each depth (``ends[d]``), how many reach each depth
    k = 1 .. ``depths`` (default: the largest end): suffix sums, O(N + K) rather than O(N * K)."""
    k_max = max(ends, default=0) if depths is None else depths
    out = [0] * k_max
    running = 0
    for k in range(max(max(ends, default=0), k_max), 0, -1):
        running += ends.get(k, 0)
        if k <= k_max:
            out[k - 1] = running
    return out


def metrics_from_counts(
    c: CohortCounts, *, seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES
) -> Metrics:
    """The docs/protocol.md section 5 fields (without ``labels``) from a cohort's counts."""
    n = c.n
    fed_values = sorted(c.feds)
    fed_freq = [c.feds[f] for f in fed_values]
    # AUC terms are floats: pairs such as (1, 2) and (2, 4) give the same one and count as one
    # distinct value, as they would among the terms themselves.
    auc_terms: dict[float, int] = {}
    for (ok, length), count in c.aucs.items():
        term = ok / length
        auc_terms[term] = auc_terms.get(term, 0) + count
    auc_values = sorted(auc_terms)
    auc_freq = [auc_terms[v] for v in auc_values]
    n_auc = sum(auc_freq)
    surv, at = c.survive, c.n_at_depth
    return {
        "n": n,
        "ter": _ratio(c.n_executable, n),
        "mean_fed": sum(f * k for f, k in c.feds.items()) / n if n else None,
        # math.fsum of the terms over their number, as the definition reads.
        "auc_pec": float(_exact_sum(auc_values, auc_freq)) / n_auc if n_auc else None,
        "n_empty": n - n_auc,
        "pec": [s / n for s in surv],
        "pec_elig": [_ratio(s, d) for s, d in zip(surv, at, strict=True)],
        "n_at_depth": list(at),
        "final_success": _ratio(c.n_success, c.n_outcome_known),
        "n_outcome_known": c.n_outcome_known,
        "rr": _ratio(c.rr_success, c.rr_eligible),
        "rr_eligible": c.rr_eligible,
        "s": _ratio(c.s_success, c.s_eligible),
        "causes": dict(c.causes),
        "ci": {
            "ter": wilson(c.n_executable, n),
            "final_success": wilson(c.n_success, c.n_outcome_known),
            "rr": wilson(c.rr_success, c.rr_eligible),
            "s": wilson(c.s_success, c.s_eligible),
            "auc_pec": bootstrap_counts_ci(
                np.asarray(auc_values, dtype=float),
                np.asarray(auc_freq, dtype=np.int64),
                seed=seed,
                resamples=resamples,
            ),
            "mean_fed": bootstrap_counts_ci(
                np.asarray(fed_values, dtype=float),
                np.asarray(fed_freq, dtype=np.int64),
                seed=seed,
                resamples=resamples,
            ),
        },
        "incomplete": c.incomplete,
        "disagreements": c.disagreements,
        # Not in the section 5 example, added (the keys are open for additions): the counts
        # behind the proportions, so a reader can recompute any interval.
        "n_executable": c.n_executable,
        "n_success": c.n_success,
        "s_eligible": c.s_eligible,
    }


def compute_metrics(
    records: Iterable[TrajectoryRecord],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Metrics:
    """The docs/protocol.md section 5 fields for one cohort (without ``labels``).

    Proportions get 95% Wilson intervals; ``auc_pec`` and ``mean_fed`` a percentile bootstrap
    over trajectories, seeded so the same input always prints the same interval."""
    return metrics_from_counts(count_records(records), seed=seed, resamples=resamples)


def wilson_band(counts: Sequence[int], totals: Sequence[int]) -> list[Interval | None]:
    """Wilson interval per depth, e.g. for PEC (totals = N) or PEC-eligible (n_at_depth)."""
    return [wilson(c, t) for c, t in zip(counts, totals, strict=True)]
