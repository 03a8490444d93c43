"""What the reading found that the figures alone do not say: the facts behind the report's
warnings (incomplete trajectories, disagreements, appended runs, lost call spans, unknown
outcomes and causes, missing labels), and the warnings written from them.

The facts are counts and the first few trajectory ids of each kind (ids in sorted order), so
they can come from records (``facts_from_records``) or from a SQL engine that counts the same
things (clickhouse.py); ``render_findings`` writes the same warnings from either.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from .._contract import CAUSES
from .escape import short_id
from .metrics import UNKNOWN_CAUSE, TrajectoryRecord

# The kinds of disagreement (docs/protocol.md section 5), each written "kind: detail".
MORE_THAN_ONE_SUMMARY = "more than one summary span"
TWO_SUMMARIES = "two different summaries under one span id"
FED_OUT_OF_RANGE = "summary FED out of range"
STEP_BEYOND = "call step beyond the summary's length"
BAD_BEFORE = "invalid call before the summary's FED"
CAUSE_DIFFERS = "cause differs from the call span's"
EXAMPLES = 3


@dataclass
class Examples:
    """How many trajectories are of one kind, and the first ``EXAMPLES`` of them (by id),
    each as it is named in the warning."""

    count: int = 0
    first: list[str] = field(default_factory=list)

    def add(self, name: str) -> None:
        self.count += 1
        if len(self.first) < EXAMPLES:
            self.first.append(name)


@dataclass
class Findings:
    n: int = 0
    incomplete: Examples = field(default_factory=Examples)
    several_summaries: int = 0
    several_first: tuple[str, int | None] | None = None
    """The first trajectory with several summary spans, and how many it has (None: unknown)."""
    short: Examples = field(default_factory=Examples)
    disagreements: dict[str, Examples] = field(default_factory=dict)
    """Kind of disagreement -> the trajectories with it, named ``id (detail)``."""
    unknown_outcome: int = 0
    odd_causes: dict[str, int] = field(default_factory=dict)
    """First-error causes outside the five, ``(none)`` for a missing one -> count."""
    missing_labels: list[tuple[str, Examples]] = field(default_factory=list)


def _several_summaries(r: TrajectoryRecord) -> bool:
    return bool(r.summary_spans and r.summary_spans > 1) or any(
        d.startswith(MORE_THAN_ONE_SUMMARY) for d in r.disagreements
    )


def facts_from_records(records: Sequence[TrajectoryRecord], by: Sequence[str] = ()) -> Findings:
    """The findings of records in the order given (the reader sorts them by id)."""
    f = Findings(n=len(records))
    kinds: dict[str, Examples] = defaultdict(Examples)
    odd: Counter[str] = Counter()
    missing = {key: Examples() for key in by}
    for r in records:
        tid = r.trajectory_id
        if r.incomplete:
            f.incomplete.add(tid)
        several = _several_summaries(r)
        if several:
            f.several_summaries += 1
            if f.several_first is None:
                count = r.summary_spans if r.summary_spans and r.summary_spans > 1 else None
                f.several_first = (tid, count)
        elif r.call_spans is not None and r.call_spans < r.length:
            f.short.add(f"{tid} ({r.call_spans} of {r.length})")
        for d in r.disagreements:
            kind, _, detail = d.partition(": ")
            if kind != MORE_THAN_ONE_SUMMARY:  # said apart, with the likely reason
                kinds[kind].add(f"{tid} ({detail})" if detail else tid)
        f.unknown_outcome += r.success is None
        if not r.executable and r.first_error_cause not in CAUSES:
            odd[r.first_error_cause or "(none)"] += 1
        for key, ex in missing.items():
            if key not in r.labels:
                ex.add(tid)
    f.disagreements = dict(kinds)
    f.odd_causes = dict(odd)
    f.missing_labels = list(missing.items())
    return f


def _examples(ex: Examples) -> str:
    more = f", ... ({ex.count - EXAMPLES} more)" if ex.count > EXAMPLES else ""
    return ", ".join(short_id(i) for i in ex.first[:EXAMPLES]) + more


def render_findings(f: Findings) -> list[str]:
    """The warnings, in words, never hidden."""
    out: list[str] = []
    n = f.n
    if f.incomplete.count:
        out.append(
            f"{f.incomplete.count} of {n} trajectories have no summary span (incomplete): T "
            "and FED come from their call spans and the outcome is unknown: "
            + _examples(f.incomplete)
        )
    if f.several_summaries:
        first, count = f.several_first or ("?", None)
        out.append(
            f"{f.several_summaries} of {n} trajectories have several summary spans (e.g. "
            f"trajectory '{short_id(first)}' has {count or 'more than one'} summary spans): "
            "were two runs appended to one file? Their call spans are merged under one id and "
            "one summary is used (the smallest trace and span id). Give each run its own file "
            "or its own trajectory ids"
        )
    if f.short.count:
        out.append(
            f"{f.short.count} trajectories have fewer call spans than their length: call spans "
            "were lost (a tracer provider shut down or an exporter failed mid-run?) or are in "
            "a file not given to the report. T, FED and Y still come from the summary span "
            "where there is one; without one they come from the call spans left: "
            + _examples(f.short)
        )
    for kind, ex in sorted(f.disagreements.items()):
        out.append(
            f"disagreement in {ex.count} trajectories: {kind}; the summary was used: "
            + _examples(ex)
        )
    if f.unknown_outcome:
        out.append(
            f"{f.unknown_outcome} of {n} trajectories have no known outcome: final success, RR "
            f"and S count only the {n - f.unknown_outcome} that have one"
        )
    if f.odd_causes:
        words = ", ".join(f"{c} x{k}" for c, k in sorted(f.odd_causes.items()))
        out.append(
            f"{sum(f.odd_causes.values())} first errors have no recognised cause ({words}), "
            f"counted as '{UNKNOWN_CAUSE}'"
        )
    for key, ex in f.missing_labels:
        if ex.count:
            out.append(
                f"{ex.count} trajectories lack label '{key}' (grouped under null): " + _examples(ex)
            )
    return out
