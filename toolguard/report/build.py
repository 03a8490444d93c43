"""The report object of docs/protocol.md section 5: groups on labels, overall, warnings."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict, cast

from .cost import Cost, cost_from_counts, cost_warnings, count_cost
from .findings import facts_from_records, render_findings
from .metrics import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Metrics,
    TrajectoryRecord,
    compute_metrics,
)
from .reader import ReadStats

Labels = dict[str, str | None]


class GroupMetrics(Metrics):
    """One object of ``groups`` (and ``overall``): the label values, then the metrics."""

    labels: Labels
    cost: NotRequired[Cost]


class Report(TypedDict):
    """The report object of docs/protocol.md section 5."""

    groups: list[GroupMetrics]
    overall: GroupMetrics
    warnings: list[str]


class BuiltReport(dict[str, Any]):
    """What ``build_report`` returns: the report dict itself (``json.dumps`` it, compare it
    with a dict, index it as a ``Report``), which also remembers the records and grouping it
    was built from, so that ``to_html()`` can list the trajectories. (Typed code that wants
    the method's signature checked calls ``render_html(report, records, by=...)``.)"""

    __slots__ = ("_by", "_records")

    def __init__(
        self, report: Report, records: Sequence[TrajectoryRecord], by: Sequence[str]
    ) -> None:
        super().__init__(report)
        self._records = records
        self._by = tuple(by)

    def to_html(self, *, title: str = "toolguard report", max_rows: int | None = None) -> str:
        """The report as one self-contained HTML page (needs the ``html`` extra: plotly);
        see ``render_html``."""
        from .html import render_html
        from .html_data import DEFAULT_MAX_ROWS

        return render_html(
            cast(Report, self),
            self._records,
            by=self._by,
            title=title,
            max_rows=DEFAULT_MAX_ROWS if max_rows is None else max_rows,
        )


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
    cost: bool = False,
) -> Report:
    """``{"groups": [...], "overall": {...}, "warnings": [...]}`` as docs/protocol.md section 7.

    With ``cost``, each group and ``overall`` gain a ``cost`` object (report/cost.py) from the
    records' cost fields (``read_records(..., cost=True)`` fills them).

    The dict returned also has ``to_html()``: the same report as one HTML page, with the
    trajectory table of ``records`` (BuiltReport)."""

    def group(labels: Labels, recs: Sequence[TrajectoryRecord]) -> GroupMetrics:
        # A GroupMetrics without its optional cost, which is added below when asked for.
        g = cast(
            GroupMetrics,
            {
                "labels": labels,
                **compute_metrics(recs, seed=seed, resamples=resamples),
            },
        )
        if cost:
            g["cost"] = cost_from_counts(count_cost(recs))
        return g

    groups = [group(labels, recs) for labels, recs in group_records(records, by)]
    # Without groups, the one group is the whole cohort: no need to compute it twice.
    overall = group({}, records) if by else groups[0].copy()
    report: Report = {
        "groups": groups,
        "overall": overall,
        "warnings": [*warnings, *record_warnings(records, by)],
    }
    # The dict, with to_html() (BuiltReport): still exactly the Report a caller indexes.
    return cast(Report, BuiltReport(report, records, by))


def record_warnings(records: Sequence[TrajectoryRecord], by: Sequence[str] = ()) -> list[str]:
    """What the reader had to guess or found inconsistent, in words, never hidden."""
    return render_findings(facts_from_records(records, by))


def read_warnings(stats: ReadStats) -> list[str]:
    out = []
    if not stats.lines:
        out.append(f"the input ({', '.join(stats.files)}) is empty: no trajectory to report on")
    lines = stats.skipped - stats.skipped_spans
    if lines:
        first = stats.first_skipped_line or stats.first_skipped
        out.append(f"{lines} invalid input lines skipped; the first: {first}")
    if stats.skipped_spans:
        out.append(
            f"{stats.skipped_spans} invalid spans skipped (the other spans of their lines were "
            f"read); the first: {stats.first_skipped_span}"
        )
    return out + cost_warnings(stats.cost_unattributed_spans, stats.cost_invalid_spans)


def outcome_warnings(path: str, used: int, unmatched: int) -> list[str]:
    out = [f"outcomes from {path} override the spans' outcome for {used} trajectories"]
    if unmatched:
        out.append(f"{unmatched} outcomes in {path} name no trajectory found in the spans")
    return out
