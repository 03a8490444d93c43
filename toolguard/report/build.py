"""The report object of docs/protocol.md section 5: groups on labels, overall, warnings."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TypedDict

from .._contract import CAUSES
from .collect import MORE_THAN_ONE_SUMMARY
from .escape import short_id
from .metrics import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    UNKNOWN_CAUSE,
    Metrics,
    TrajectoryRecord,
    compute_metrics,
)
from .reader import ReadStats

Labels = dict[str, str | None]
_EXAMPLES = 3


class GroupMetrics(Metrics):
    """One object of ``groups`` (and ``overall``): the label values, then the metrics."""

    labels: Labels


class Report(TypedDict):
    """The report object of docs/protocol.md section 5."""

    groups: list[GroupMetrics]
    overall: GroupMetrics
    warnings: list[str]


def _sort_key(key: tuple[str | None, ...]) -> tuple[tuple[bool, str], ...]:
    return tuple((v is None, v or "") for v in key)  # unlabelled groups last


def group_records(
    records: Sequence[TrajectoryRecord], by: Sequence[str]
) -> list[tuple[Labels, list[TrajectoryRecord]]]:
    """Split on the values of the labels named in ``by`` (missing label -> None)."""
    if not by:
        return [({}, list(records))]
    groups: dict[tuple[str | None, ...], list[TrajectoryRecord]] = defaultdict(list)
    for r in records:
        groups[tuple(r.labels.get(k) for k in by)].append(r)
    return [(dict(zip(by, key, strict=True)), groups[key]) for key in sorted(groups, key=_sort_key)]


def build_report(
    records: Sequence[TrajectoryRecord],
    *,
    by: Sequence[str] = (),
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    warnings: Sequence[str] = (),
) -> Report:
    """``{"groups": [...], "overall": {...}, "warnings": [...]}`` as docs/protocol.md section 5."""
    groups: list[GroupMetrics] = []
    for labels, recs in group_records(records, by):
        groups.append({"labels": labels, **compute_metrics(recs, seed=seed, resamples=resamples)})
    overall: GroupMetrics
    if by:
        overall = {"labels": {}, **compute_metrics(records, seed=seed, resamples=resamples)}
    else:
        overall = groups[0].copy()  # the one group is the whole cohort: no need to compute twice
    return {
        "groups": groups,
        "overall": overall,
        "warnings": [*warnings, *record_warnings(records, by)],
    }


def _examples(ids: Sequence[str]) -> str:
    more = f", ... ({len(ids) - _EXAMPLES} more)" if len(ids) > _EXAMPLES else ""
    return ", ".join(short_id(i) for i in ids[:_EXAMPLES]) + more


def _several_summaries(r: TrajectoryRecord) -> bool:
    return bool(r.summary_spans and r.summary_spans > 1) or any(
        d.startswith(MORE_THAN_ONE_SUMMARY) for d in r.disagreements
    )


def record_warnings(records: Sequence[TrajectoryRecord], by: Sequence[str] = ()) -> list[str]:
    """What the reader had to guess or found inconsistent, in words, never hidden."""
    out: list[str] = []
    n = len(records)
    incomplete = [r.trajectory_id for r in records if r.incomplete]
    if incomplete:
        out.append(
            f"{len(incomplete)} of {n} trajectories have no summary span (incomplete): T and FED "
            f"come from their call spans and the outcome is unknown: {_examples(incomplete)}"
        )
    appended = [r for r in records if _several_summaries(r)]
    if appended:
        first = appended[0]
        count = first.summary_spans if first.summary_spans and first.summary_spans > 1 else None
        out.append(
            f"{len(appended)} of {n} trajectories have several summary spans (e.g. trajectory "
            f"'{short_id(first.trajectory_id)}' has {count or 'more than one'} summary spans): "
            "were two runs appended to one file? Their call spans are merged under one id and "
            "one summary is used (the smallest trace and span id). Give each run its own file "
            "or its own trajectory ids"
        )
    short = [
        r
        for r in records
        if r.call_spans is not None and r.call_spans < r.length and not _several_summaries(r)
    ]
    if short:
        out.append(
            f"{len(short)} trajectories have fewer call spans than their length: call spans "
            "were lost (a tracer provider shut down or an exporter failed mid-run?) or are in "
            "a file not given to the report. T, FED and Y still come from the summary span "
            "where there is one; without one they come from the call spans left: "
            + _examples([f"{r.trajectory_id} ({r.call_spans} of {r.length})" for r in short])
        )
    kinds: dict[str, list[str]] = defaultdict(list)
    for r in records:
        for d in r.disagreements:
            kind, _, detail = d.partition(": ")
            if kind == MORE_THAN_ONE_SUMMARY:
                continue  # said above, with the likely reason
            kinds[kind].append(f"{r.trajectory_id} ({detail})" if detail else r.trajectory_id)
    for kind, where in sorted(kinds.items()):
        out.append(
            f"disagreement in {len(where)} trajectories: {kind}; the summary was used: "
            f"{_examples(where)}"
        )
    unknown_y = sum(r.success is None for r in records)
    if unknown_y:
        out.append(
            f"{unknown_y} of {n} trajectories have no known outcome: final success, RR and S "
            f"count only the {n - unknown_y} that have one"
        )
    odd = Counter(
        r.first_error_cause or "(none)"
        for r in records
        if not r.executable and r.first_error_cause not in CAUSES
    )
    if odd:
        words = ", ".join(f"{c} x{k}" for c, k in sorted(odd.items()))
        out.append(
            f"{sum(odd.values())} first errors have no recognised cause ({words}), "
            f"counted as '{UNKNOWN_CAUSE}'"
        )
    for key in by:
        missing = [r.trajectory_id for r in records if key not in r.labels]
        if missing:
            out.append(
                f"{len(missing)} trajectories lack label '{key}' (grouped under null): "
                f"{_examples(missing)}"
            )
    return out


def read_warnings(stats: ReadStats) -> list[str]:
    if not stats.skipped:
        return []
    return [f"{stats.skipped} invalid input lines skipped; the first: {stats.first_skipped}"]


def outcome_warnings(path: str, used: int, unmatched: int) -> list[str]:
    out = [f"outcomes from {path} override the spans' outcome for {used} trajectories"]
    if unmatched:
        out.append(f"{unmatched} outcomes in {path} name no trajectory found in the spans")
    return out
