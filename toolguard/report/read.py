"""The report's entry points: span files, ``otel_traces`` rows or a Phoenix project read into
one record per trajectory (collect.py folds the spans, reader.py parses the lines)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import _contract as A
from .clickhouse_rows import iter_rows
from .collect import DEFAULT_MAX_LENGTH, Collector
from .cost import CostCollector
from .inputs import chooser
from .metrics import TrajectoryRecord
from .phoenix import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_PAGES,
    DEFAULT_PAGE_SIZE,
    DEFAULT_TIMEOUT_S,
    iter_phoenix_requests,
)
from .reader import (
    DEFAULT_MAX_LINE_BYTES,
    ExportRequest,
    ReadStats,
    ReportInputError,
    iter_exports,
)
from .span_values import Malformed


def read_records(
    patterns: Iterable[str],
    *,
    skip_invalid: bool = False,
    progress: bool | None = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_length: int = DEFAULT_MAX_LENGTH,
    input_format: str = "auto",
    cost: bool = False,
) -> tuple[list[TrajectoryRecord], ReadStats]:
    """Read span files (globs, `-`, `.gz`) into trajectory records.

    The files are OTLP JSON Lines, saved Phoenix span exports or ClickHouse ``otel_traces``
    rows (``input_format`` "otlp", "phoenix", "clickhouse", or "auto" to tell them apart by
    their first key; docs/backends.md). With ``cost``, each record also carries the tokens
    and tool time of report/cost.py.
    Raises ReportInputError on a malformed line or span (unless ``skip_invalid``, which skips
    a broken line, or only the bad span of a line otherwise well formed) and when the input
    holds no toolguard trajectory at all. A line longer than ``max_line_bytes`` and a step, T
    or FED beyond ``max_length`` are malformed lines (docs/report-limits.md).

    The garbage collector is left as it is: this is a library call, and switching it off would
    switch it off for every thread of the process. (The ``toolguard`` command, which owns its
    process, turns it off for the read.)"""
    stats = ReadStats()
    requests = iter_exports(
        patterns,
        stats,
        skip_invalid=skip_invalid,
        progress=progress,
        max_line_bytes=max_line_bytes,
        choose=chooser(input_format),
    )
    return collect_requests(
        requests, stats, skip_invalid=skip_invalid, max_length=max_length, cost=cost
    )


def read_rows(
    rows: Iterable[Any],
    *,
    skip_invalid: bool = False,
    max_length: int = DEFAULT_MAX_LENGTH,
    cost: bool = False,
    where: str = "row",
) -> tuple[list[TrajectoryRecord], ReadStats]:
    """Rows of an ``otel_traces`` table (mappings with ``TraceId``, ``SpanId``,
    ``SpanAttributes`` and ``Duration``, as a ClickHouse client returns them) into trajectory
    records, with the same reading rules as the files (clickhouse_rows.py)."""
    stats = ReadStats(files=[where])
    return collect_requests(
        iter_rows(rows, where, stats),
        stats,
        skip_invalid=skip_invalid,
        max_length=max_length,
        cost=cost,
    )


def read_phoenix(
    url: str,
    project: str,
    *,
    api_key: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_length: int = DEFAULT_MAX_LENGTH,
    max_page_bytes: int = DEFAULT_MAX_LINE_BYTES,
    cost: bool = False,
    skip_invalid: bool = False,
    max_pages: int = DEFAULT_MAX_PAGES,
    deadline: float = DEFAULT_DEADLINE_S,
) -> tuple[list[TrajectoryRecord], ReadStats]:
    """Pull every span of ``project`` from the Phoenix server at ``url`` (its span export,
    page by page) into trajectory records, with the same reading rules as the files.

    ``api_key`` is sent as ``Authorization: Bearer``. Raises BackendError (a ReportInputError)
    naming the URL and its answer when the server is down, refuses or answers no span export,
    or the pull goes past ``max_pages`` pages or ``deadline`` seconds (see
    :func:`~toolguard.report.phoenix.iter_phoenix_pages`), and ReportInputError when the
    project holds no toolguard trajectory, or (unless ``skip_invalid``, which skips that span
    alone) a span that breaks the contract, naming its page."""
    stats = ReadStats()
    requests = iter_phoenix_requests(
        url,
        project,
        stats,
        api_key=api_key,
        page_size=page_size,
        timeout=timeout,
        max_page_bytes=max_page_bytes,
        max_pages=max_pages,
        deadline=deadline,
    )
    return collect_requests(
        requests, stats, skip_invalid=skip_invalid, max_length=max_length, cost=cost
    )


def collect_requests(
    requests: Iterable[tuple[ExportRequest, str]],
    stats: ReadStats,
    *,
    skip_invalid: bool = False,
    max_length: int = DEFAULT_MAX_LENGTH,
    cost: bool = False,
) -> tuple[list[TrajectoryRecord], ReadStats]:
    """Fold ``(export request, where)`` pairs into trajectory records (read_records' second
    half, for any source of export requests)."""
    col = Collector(max_length=max_length)
    costs = CostCollector() if cost else None
    for request, where in requests:
        try:
            bad = col.feed(request, skip_spans=skip_invalid)
        except Malformed as exc:
            if not skip_invalid:
                raise ReportInputError(f"{where}: {exc}") from None
            stats.skip(where, str(exc))
            continue
        for b in bad:
            stats.skip(f"{where}: span {b.position}", b.why, span=True)
        if costs is not None:
            costs.feed(_without(request, {id(b.span) for b in bad}) if bad else request)
    stats.spans = col.spans
    if not col.trajs and not stats.lines:
        return [], stats  # empty files (sessions without a call): an empty report, warned
    if not col.trajs:
        files = ", ".join(stats.files)
        if stats.lines == stats.skipped and not col.spans:
            raise ReportInputError(
                f"the input ({files}) holds no valid line: no spans to report on"
            )
        raise ReportInputError(
            f"no toolguard trajectory in the input ({files}): {col.spans} spans read, none "
            f"carries {A.TRAJECTORY_ID} with {A.STEP} or {A.TRAJECTORY_LENGTH}"
        )
    if costs is None:
        return col.records(), stats
    records = costs.apply(col.records())
    stats.cost_unattributed_spans, stats.cost_invalid_spans = costs.unattributed, costs.invalid
    return records, stats


def _without(request: ExportRequest, bad: set[int]) -> ExportRequest:
    """``request`` without the spans whose ``id()`` is in ``bad`` (those the collector left
    out): the cost reader, which trusts what the collector accepted, never sees them."""
    blocks = []
    for rs in request["resourceSpans"]:
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ()
        kept = [{"spans": [s for s in ss.get("spans") or () if id(s) not in bad]} for ss in scopes]
        blocks.append({**rs, "scopeSpans": kept, "instrumentationLibrarySpans": None})
    return {"resourceSpans": blocks}
