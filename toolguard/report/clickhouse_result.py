"""The rows of the report query (clickhouse_sql.py) read back into what the Python report is
built from: each group's CohortCounts, the overall row's Findings and its --cost counts.

A driver may hand ClickHouse's 64-bit and 128-bit integers over quoted, and a sumMap as a
tuple or as a two-element list (JSON): the values are converted here, not taken as typed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._contract import CAUSES
from .clickhouse_sql import AUC_SHIFT
from .cost import CostCounts
from .findings import (
    BAD_BEFORE,
    CAUSE_DIFFERS,
    FED_OUT_OF_RANGE,
    STEP_BEYOND,
    TWO_SUMMARIES,
    Examples,
    Findings,
)
from .metrics import CohortCounts

Row = Mapping[str, Any]
_DISAGREEMENTS = (
    (FED_OUT_OF_RANGE, "n_fed_out_of_range", "fed_out_of_range_ids"),
    (STEP_BEYOND, "n_step_beyond", "step_beyond_ids"),
    (BAD_BEFORE, "n_bad_before", "bad_before_ids"),
    (CAUSE_DIFFERS, "n_cause_differs", "cause_differs_ids"),
    (TWO_SUMMARIES, "n_two_summaries", "two_summaries_ids"),
)


def as_int(v: Any) -> int:
    return int(v)  # 64-bit and 128-bit integers may come quoted, as strings


def _pair(v: Any) -> tuple[list[Any], list[Any]]:
    """A sumMap result: a (keys, values) tuple, or a two-element list in JSON."""
    keys, values = v[0], v[1]
    return list(keys), list(values)


def cohort_counts(row: Row) -> CohortCounts:
    c = CohortCounts(
        n=as_int(row["n"]),
        n_executable=as_int(row["n_executable"]),
        n_outcome_known=as_int(row["n_outcome_known"]),
        n_success=as_int(row["n_success"]),
        rr_eligible=as_int(row["rr_eligible"]),
        rr_success=as_int(row["rr_success"]),
        s_eligible=as_int(row["s_eligible"]),
        s_success=as_int(row["s_success"]),
        incomplete=as_int(row["n_incomplete"]),
        disagreements=as_int(row["n_disagreements"]),
        n_at_depth=[as_int(x) for x in row["n_at_depth"]],
        survive=[as_int(x) for x in row["survive"]],
    )
    for cause, k in zip(*_pair(row["causes"]), strict=True):
        c.add_cause(cause or None, as_int(k))
    c.feds = {as_int(f): as_int(k) for f, k in zip(*_pair(row["feds"]), strict=True)}
    for key, k in zip(*_pair(row["aucs"]), strict=True):
        ok, length = divmod(as_int(key), AUC_SHIFT)
        c.aucs[(ok, length)] = as_int(k)
    return c


def _examples(count: Any, ids: Sequence[Any]) -> Examples:
    return Examples(as_int(count), [str(i) for i in ids])


def _named(count: Any, pairs: Sequence[Any]) -> Examples:
    return Examples(as_int(count), [f"{p[0]} ({p[1]})" for p in pairs])


def row_findings(row: Row, by: Sequence[str]) -> Findings:
    f = Findings(n=as_int(row["n"]))
    f.incomplete = _examples(row["n_incomplete"], row["incomplete_ids"])
    f.several_summaries = as_int(row["several"])
    if f.several_summaries:
        first = row["several_first"]
        f.several_first = (str(first[0]), as_int(first[1]))
    f.short = Examples(
        as_int(row["short"]),
        [f"{t[0]} ({as_int(t[1])} of {as_int(t[2])})" for t in row["short_ids"]],
    )
    for kind, count, ids in _DISAGREEMENTS:
        if as_int(row[count]):
            if kind == TWO_SUMMARIES:
                f.disagreements[kind] = _examples(row[count], row[ids])
            else:
                f.disagreements[kind] = _named(row[count], row[ids])
    f.unknown_outcome = f.n - as_int(row["n_outcome_known"])
    for cause, k in zip(*_pair(row["causes"]), strict=True):
        if cause not in CAUSES:
            f.odd_causes[cause or "(none)"] = f.odd_causes.get(cause or "(none)", 0) + as_int(k)
    counts, lists = list(row["missing_labels"]), list(row["missing_label_ids"])
    first = {key: i for i, key in reversed(list(enumerate(by)))}  # a key given twice: once
    f.missing_labels = [
        (key, _examples(counts[i] if i < len(counts) else 0, lists[i] if i < len(lists) else []))
        for key, i in sorted(first.items(), key=lambda kv: kv[1])
    ]
    return f


def cost_counts(row: Row) -> CostCounts:
    return CostCounts(
        n_with_tokens=as_int(row["n_with_tokens"]),
        input_tokens=as_int(row["input_tokens"]),
        output_tokens=as_int(row["output_tokens"]),
        n_with_latency=as_int(row["n_with_latency"]),
        tool_ns=as_int(row["tool_ns_total"]),
    )
