"""The cohort metrics against docs/protocol.md section 3: the worked examples and the identities."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard._contract import CAUSES
from toolguard.report.metrics import TrajectoryRecord, bootstrap_mean_ci, compute_metrics, wilson


def rec(
    tid: str,
    length: int,
    fed: int,
    success: bool | None = None,
    cause: str | None = None,
    **kw: object,
) -> TrajectoryRecord:
    if fed <= length and cause is None:
        cause = "schema"
    return TrajectoryRecord(tid, length, fed, cause, success, **kw)  # type: ignore[arg-type]


def test_paper_worked_example_contact_removal() -> None:
    a = rec("A", 3, 1, True, "state_consistency")  # remove rejected, search, remove ok
    b = rec("B", 2, 3, True)  # search then remove
    m = compute_metrics([a, b])
    assert m["n"] == 2
    assert m["ter"] == 0.5
    assert m["mean_fed"] == 2.0
    assert m["auc_pec"] == 0.5
    assert m["pec"] == [0.5, 0.5, 0.0]
    assert m["pec_elig"] == [0.5, 0.5, 0.0]
    assert m["n_at_depth"] == [2, 2, 1]
    assert m["rr"] == 1.0 and m["rr_eligible"] == 1
    assert m["s"] == 1.0
    assert m["final_success"] == 1.0
    assert m["causes"] == {**dict.fromkeys(CAUSES, 0), "state_consistency": 1}
    assert m["n_empty"] == 0


def test_table2_row_bfcl_llama4_plan_react() -> None:
    cohort = [rec(f"ok{i}", 4, 5, True) for i in range(10)]
    cohort += [rec(f"br{i}", 4, 2, i < 138) for i in range(190)]
    m = compute_metrics(cohort)
    assert m["n"] == 200
    assert m["ter"] == 0.05
    assert m["s"] == 1.0
    assert m["rr"] == 138 / 190
    assert round(m["rr"], 3) == 0.726
    assert m["rr_eligible"] == 190
    assert m["final_success"] == 0.74
    assert m["n_outcome_known"] == 200


def test_nulls_where_the_protocol_says_null() -> None:
    m = compute_metrics([rec("a", 2, 3, None), rec("b", 0, 1, None)])
    assert m["final_success"] is None and m["ci"]["final_success"] is None
    assert m["rr"] is None and m["rr_eligible"] == 0
    assert m["s"] is None and m["ci"]["s"] is None
    # T = 0: out of the AUC-PEC mean, counted as empty, executable (FED = T + 1 = 1).
    assert m["n_empty"] == 1 and m["auc_pec"] == 1.0 and m["ter"] == 1.0
    m0 = compute_metrics([rec("z", 0, 1)])
    assert m0["auc_pec"] is None and m0["pec"] == [] and m0["ci"]["auc_pec"] is None


def test_depths_run_to_the_longest_trajectory() -> None:
    # K = the largest T, so n_at_depth >= 1 at every listed depth (pec_elig never null there),
    # while PEC keeps the fixed cohort N as denominator.
    m = compute_metrics([rec("a", 1, 2), rec("b", 3, 1)])
    assert m["n_at_depth"] == [2, 1, 1]
    assert m["pec_elig"] == [0.5, 0.0, 0.0]
    assert m["pec"] == [0.5, 0.0, 0.0]


def test_unknown_cause_is_counted_not_dropped() -> None:
    m = compute_metrics([rec("a", 2, 1, cause="mystery"), rec("b", 2, 2, cause="schema")])
    assert m["causes"]["unknown"] == 1 and m["causes"]["schema"] == 1


def test_record_rejects_impossible_fed() -> None:
    with pytest.raises(ValueError, match="FED"):
        TrajectoryRecord("x", 2, 4)
    with pytest.raises(ValueError):
        TrajectoryRecord("x", -1, 0)


def test_wilson_known_values() -> None:
    # By hand: centre (p + z²/2n) / (1 + z²/n), half-width z·sqrt(p(1-p)/n + z²/4n²) / (...).
    lo, hi = wilson(10, 200)  # type: ignore[misc]
    assert lo == pytest.approx(0.027383, abs=1e-6) and hi == pytest.approx(0.089578, abs=1e-6)
    assert wilson(0, 0) is None
    assert wilson(5, 5)[1] == 1.0  # type: ignore[index]


def test_bootstrap_is_seeded_and_covers_the_mean() -> None:
    vals = [float(i % 7) for i in range(300)]
    a = bootstrap_mean_ci(vals, seed=1)
    assert a == bootstrap_mean_ci(vals, seed=1)
    assert a != bootstrap_mean_ci(vals, seed=2)
    mean = sum(vals) / len(vals)
    assert a is not None and a[0] < mean < a[1]
    assert bootstrap_mean_ci([2.0, 2.0]) == [2.0, 2.0]
    assert bootstrap_mean_ci([]) is None


# --- generated cohorts ---------------------------------------------------------------------


@st.composite
def records(draw: st.DrawFn) -> TrajectoryRecord:
    length = draw(st.integers(0, 12))
    fed = draw(st.integers(1, length + 1))
    success = draw(st.sampled_from([True, False, None]))
    cause = draw(st.sampled_from(CAUSES)) if fed <= length else None
    return TrajectoryRecord("t", length, fed, cause, success)


cohorts = st.lists(records(), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(cohorts)
def test_pec_is_n_at_depth_over_n_times_pec_elig(cohort: list[TrajectoryRecord]) -> None:
    m = compute_metrics(cohort, resamples=0)
    n = m["n"]
    for pec, elig, at in zip(m["pec"], m["pec_elig"], m["n_at_depth"], strict=True):
        assert math.isclose(pec, at / n * (elig or 0.0), abs_tol=1e-12)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    cohorts.map(
        lambda c: [
            TrajectoryRecord(
                r.trajectory_id, r.length, r.fed, r.first_error_cause, r.success is True
            )
            for r in c
        ]
    )
)
def test_final_success_decomposes_into_ter_s_and_rr(cohort: list[TrajectoryRecord]) -> None:
    m = compute_metrics(cohort, resamples=0)
    ter = m["ter"]
    s_term = ter * m["s"] if ter else 0.0
    rr_term = (1 - ter) * m["rr"] if ter != 1 else 0.0
    assert math.isclose(m["final_success"], s_term + rr_term, abs_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(cohorts)
def test_matches_the_definitions_computed_naively(cohort: list[TrajectoryRecord]) -> None:
    """Every figure recomputed straight from docs/protocol.md section 3, in exact fractions."""
    m = compute_metrics(cohort, resamples=0)
    n = len(cohort)
    k_max = max(r.length for r in cohort)
    ex = [r for r in cohort if r.fed == r.length + 1]
    known = [r for r in cohort if r.success is not None]
    broke_known = [r for r in known if r.fed <= r.length]
    assert m["ter"] == float(Fraction(len(ex), n))
    assert math.isclose(m["mean_fed"], sum(r.fed for r in cohort) / n, abs_tol=1e-12)
    nonempty = [r for r in cohort if r.length >= 1]
    if nonempty:
        want = sum(Fraction(r.fed - 1, r.length) for r in nonempty) / len(nonempty)
        assert math.isclose(m["auc_pec"], float(want), abs_tol=1e-12)
    for k in range(1, k_max + 1):
        alive = sum(r.length >= k and r.fed > k for r in cohort)
        at = sum(r.length >= k for r in cohort)
        assert m["n_at_depth"][k - 1] == at
        assert m["pec"][k - 1] == alive / n
        assert m["pec_elig"][k - 1] == (alive / at if at else None)
    assert len(m["pec"]) == k_max
    assert m["rr_eligible"] == len(broke_known)
    if broke_known:
        assert m["rr"] == sum(r.success is True for r in broke_known) / len(broke_known)
    assert m["n_outcome_known"] == len(known)
    assert sum(m["causes"].values()) == n - len(ex)


@pytest.mark.parametrize("values", [[0.8, 0.8, 0.75], [0.1, 0.1, 0.2], [0.7, 0.7, 0.6]])
def test_bootstrap_interval_stays_within_the_values(values: list[float]) -> None:
    # A resample of three 0.8s has the mean (0.8 + 0.8 + 0.8) / 3 = 0.8000000000000002 in
    # floats: an interval of a mean must still not reach past the largest value (an AUC-PEC
    # interval above a cohort whose every trajectory scores 0.8).
    lo, hi = bootstrap_mean_ci(values)  # type: ignore[misc]
    assert min(values) <= lo <= hi <= max(values)
