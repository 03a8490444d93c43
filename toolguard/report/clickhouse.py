"""The report computed by ClickHouse (clickhouse_sql.py) and printed like the Python report.

``sql_report(run, table, ...)`` takes a ``run(sql) -> rows`` callable, so the same query runs
on a server through clickhouse-connect (``connect``), on chdb in process (the tests and the
benchmark), or anywhere else that returns rows as mappings of column name to value. It checks
the table's columns first (``DESCRIBE TABLE``), runs the one query, and turns the counts it
returns into the report object of docs/protocol.md section 7 with the same code the Python
report uses (metrics.metrics_from_counts, findings.render_findings, cost.cost_from_counts):
intervals are bootstrapped here from the per-group histograms, without pulling any span.
"""

from __future__ import annotations

import logging
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from .._contract import CAUSES
from .build import GroupMetrics, Labels, Report, _sort_key
from .clickhouse_sql import AUC_SHIFT, quote_table, report_query
from .cost import CostCounts, cost_from_counts, cost_warnings
from .findings import (
    BAD_BEFORE,
    CAUSE_DIFFERS,
    FED_OUT_OF_RANGE,
    STEP_BEYOND,
    TWO_SUMMARIES,
    Examples,
    Findings,
    render_findings,
)
from .metrics import DEFAULT_RESAMPLES, DEFAULT_SEED, CohortCounts, metrics_from_counts
from .reader import BackendError

Row = Mapping[str, Any]
Run = Callable[[str], Sequence[Row]]
"""Runs one SQL statement and returns its rows as mappings (column name -> value)."""

CLICKHOUSE_EXTRA_HINT = (
    "reading ClickHouse needs clickhouse-connect: pip install 'toolguard-otel[clickhouse]'"
)
NEEDED_COLUMNS = ("TraceId", "SpanId", "SpanAttributes")
COST_COLUMNS = ("Duration",)
_DISAGREEMENTS = (
    (FED_OUT_OF_RANGE, "n_fed_out_of_range", "fed_out_of_range_ids"),
    (STEP_BEYOND, "n_step_beyond", "step_beyond_ids"),
    (BAD_BEFORE, "n_bad_before", "bad_before_ids"),
    (CAUSE_DIFFERS, "n_cause_differs", "cause_differs_ids"),
    (TWO_SUMMARIES, "n_two_summaries", "two_summaries_ids"),
)


class ClickHouseError(BackendError):
    """ClickHouse could not be read: the server is down or refused, the table is missing or
    lacks a column the report needs, the query failed, or the spans break the contract. The
    message names the URL or table and what was answered."""


def check_columns(run: Run, table: str, *, cost: bool = False) -> None:
    """Raise ClickHouseError naming the first column the report needs that ``table`` lacks."""
    rows = run(f"DESCRIBE TABLE {quote_table(table)}")
    have = {str(r.get("name")) for r in rows}
    for column in NEEDED_COLUMNS + (COST_COLUMNS if cost else ()):
        if column not in have:
            raise ClickHouseError(
                f"table {table} has no column {column}: the report reads "
                f"{', '.join(NEEDED_COLUMNS + COST_COLUMNS)} as the OpenTelemetry Collector's "
                f"ClickHouse exporter writes them (otel_traces; columns found: "
                f"{', '.join(sorted(have)[:12]) or 'none'})"
            )


def _int(v: Any) -> int:
    return int(v)  # 64-bit and 128-bit integers may come quoted, as strings


def _pair(v: Any) -> tuple[list[Any], list[Any]]:
    """A sumMap result: a (keys, values) tuple, or a two-element list in JSON."""
    keys, values = v[0], v[1]
    return list(keys), list(values)


def _counts(row: Row) -> CohortCounts:
    c = CohortCounts(
        n=_int(row["n"]),
        n_executable=_int(row["n_executable"]),
        n_outcome_known=_int(row["n_outcome_known"]),
        n_success=_int(row["n_success"]),
        rr_eligible=_int(row["rr_eligible"]),
        rr_success=_int(row["rr_success"]),
        s_eligible=_int(row["s_eligible"]),
        s_success=_int(row["s_success"]),
        incomplete=_int(row["n_incomplete"]),
        disagreements=_int(row["n_disagreements"]),
        n_at_depth=[_int(x) for x in row["n_at_depth"]],
        survive=[_int(x) for x in row["survive"]],
    )
    for cause, k in zip(*_pair(row["causes"]), strict=True):
        c.add_cause(cause or None, _int(k))
    c.feds = {_int(f): _int(k) for f, k in zip(*_pair(row["feds"]), strict=True)}
    for key, k in zip(*_pair(row["aucs"]), strict=True):
        ok, length = divmod(_int(key), AUC_SHIFT)
        c.aucs[(ok, length)] = _int(k)
    return c


def _examples(count: Any, ids: Sequence[Any]) -> Examples:
    return Examples(_int(count), [str(i) for i in ids])


def _named(count: Any, pairs: Sequence[Any]) -> Examples:
    return Examples(_int(count), [f"{p[0]} ({p[1]})" for p in pairs])


def _findings(row: Row, by: Sequence[str]) -> Findings:
    f = Findings(n=_int(row["n"]))
    f.incomplete = _examples(row["n_incomplete"], row["incomplete_ids"])
    f.several_summaries = _int(row["several"])
    if f.several_summaries:
        first = row["several_first"]
        f.several_first = (str(first[0]), _int(first[1]))
    f.short = Examples(
        _int(row["short"]), [f"{t[0]} ({_int(t[1])} of {_int(t[2])})" for t in row["short_ids"]]
    )
    for kind, count, ids in _DISAGREEMENTS:
        if _int(row[count]):
            if kind == TWO_SUMMARIES:
                f.disagreements[kind] = _examples(row[count], row[ids])
            else:
                f.disagreements[kind] = _named(row[count], row[ids])
    f.unknown_outcome = f.n - _int(row["n_outcome_known"])
    for cause, k in zip(*_pair(row["causes"]), strict=True):
        if cause not in CAUSES:
            f.odd_causes[cause or "(none)"] = f.odd_causes.get(cause or "(none)", 0) + _int(k)
    counts, lists = list(row["missing_labels"]), list(row["missing_label_ids"])
    first = {key: i for i, key in reversed(list(enumerate(by)))}  # a key given twice: once
    f.missing_labels = [
        (key, _examples(counts[i] if i < len(counts) else 0, lists[i] if i < len(lists) else []))
        for key, i in sorted(first.items(), key=lambda kv: kv[1])
    ]
    return f


def _cost(row: Row) -> CostCounts:
    return CostCounts(
        n_with_tokens=_int(row["n_with_tokens"]),
        input_tokens=_int(row["input_tokens"]),
        output_tokens=_int(row["output_tokens"]),
        n_with_latency=_int(row["n_with_latency"]),
        tool_ns=_int(row["tool_ns_total"]),
    )


def sql_report(
    run: Run,
    table: str,
    *,
    by: Sequence[str] = (),
    where: str | None = None,
    max_length: int = 100_000,
    cost: bool = False,
    skip_invalid: bool = False,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Report:
    """The report of the spans in ``table`` (an ``otel_traces`` table), computed by the
    engine behind ``run``: the same object ``build_report`` returns for the same spans.

    ``where`` is a SQL condition on the table's own columns (``ServiceName = 'agent'``),
    passed to the engine as written: it is the caller's own SQL on their own server, never
    built from span contents. Spans that break the contract (docs/report-limits.md) raise
    ClickHouseError naming the first, or with ``skip_invalid`` are left out and counted."""
    check_columns(run, table, cost=cost)
    rows = run(report_query(table, by=by, where=where, max_length=max_length, cost=cost))
    overall_row: Row | None = None
    group_rows: list[tuple[tuple[str | None, ...], Row]] = []
    problems, first_problem = 0, None
    for row in rows:
        values = tuple(row["group_labels"])
        whole = not by or not values  # a row over every trajectory (of its `used` value)
        if whole and _int(row["problems"]):
            problems += _int(row["problems"])
            here = tuple(row["problem_first"])
            first_problem = here if first_problem is None else min(first_problem, here)
        if not _int(row["used"]):
            continue
        if whole:
            overall_row = row
        if not by or values:
            group_rows.append((values, row))
    if overall_row is None and not problems:
        raise ClickHouseError(
            f"no toolguard trajectory in table {table}"
            + (f" where {where}" if where else "")
            + ": no span carries toolguard.trajectory.id with toolguard.step or "
            "toolguard.trajectory.length"
        )
    warnings = []
    if problems:
        trace, span, why = first_problem or ("?", "?", "?")
        first = f"trace {trace} span {span}: {why}"
        if not skip_invalid:
            raise ClickHouseError(
                f"table {table}: {problems} spans break the span contract "
                f"(docs/report-limits.md); the first: {first}"
            )
        warnings.append(f"{problems} invalid spans skipped; the first: {first}")
    if overall_row is None:
        raise ClickHouseError(f"no valid toolguard trajectory in table {table}")

    def group(labels: Labels, row: Row) -> GroupMetrics:
        # A GroupMetrics without its optional cost, which is added below when asked for.
        g = cast(
            GroupMetrics,
            {
                "labels": labels,
                **metrics_from_counts(_counts(row), seed=seed, resamples=resamples),
            },
        )
        if cost:
            g["cost"] = cost_from_counts(_cost(row))
        return g

    group_rows.sort(key=lambda vr: _sort_key(vr[0]))
    groups = [group(dict(zip(by, values, strict=True)), row) for values, row in group_rows]
    overall = group({}, overall_row) if by else groups[0].copy()
    if cost:  # where the Python report has them: with what the reading found
        warnings += cost_warnings(
            _int(overall_row["cost_unattributed_spans"]), _int(overall_row["cost_invalid_spans"])
        )
    warnings += render_findings(_findings(overall_row, by))
    return {"groups": groups, "overall": overall, "warnings": warnings}


_SCHEMES = ("http", "https", "clickhouse", "clickhouses", "chdb")
_ERRNO = re.compile(r"\[Errno -?\d+\] [^\"')\]]+")


def shown_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, for messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _answer(exc: BaseException) -> str:
    """What the server (or the network) said, in one line."""
    text = " ".join(str(exc).split())
    errno = _ERRNO.search(text)
    if errno:
        return f"no answer ({errno.group(0).strip()})"
    for marker in ("received ClickHouse error", "Code:"):
        at = text.find(marker)
        if at >= 0:
            text = text[at:]
            break
    return text[:500] + (" ..." if len(text) > 500 else "")


def connect(url: str) -> tuple[Any, Run]:
    """A clickhouse-connect client for ``url`` and a ``run`` that queries through it.

    ``url``: ``http(s)://[user[:password]@]host:port[/database]``, ``clickhouse://...``, or
    ``chdb:///path`` for an embedded chdb database (clickhouse-connect's chdb backend). A
    server that is down or refuses raises ClickHouseError naming the URL (password hidden)
    and what it answered."""
    where = shown_url(url)
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in _SCHEMES:
        raise ClickHouseError(
            f"--clickhouse {where}: not a ClickHouse URL; give http://host:8123, "
            "https://user@host:8443/database, clickhouse://... or chdb:///path"
        )
    try:
        import clickhouse_connect
        from clickhouse_connect.driver.exceptions import Error as DriverError
    except ImportError:
        raise ClickHouseError(CLICKHOUSE_EXTRA_HINT) from None
    # The driver logs each failed attempt; with no logging set up, Python would print those
    # on stderr beside our one-line error. A NullHandler keeps them for whoever configures
    # logging, and quiet otherwise.
    logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())
    try:
        client = clickhouse_connect.get_client(dsn=url)
    except (DriverError, OSError, ValueError) as exc:
        raise ClickHouseError(f"ClickHouse at {where}: {_answer(exc)}") from None
    except ImportError as exc:  # chdb:// without chdb installed
        raise ClickHouseError(f"ClickHouse at {where}: {exc}") from None

    def run(sql: str) -> Sequence[Row]:
        try:
            return list(client.query(sql).named_results())
        except (DriverError, OSError) as exc:
            raise ClickHouseError(f"ClickHouse at {where}: {_answer(exc)}") from None

    return client, run


def clickhouse_report(
    url: str,
    table: str = "otel_traces",
    *,
    by: Sequence[str] = (),
    where: str | None = None,
    max_length: int = 100_000,
    cost: bool = False,
    skip_invalid: bool = False,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Report:
    """``sql_report`` on the ClickHouse server at ``url`` (see ``connect``): what
    ``toolguard report --clickhouse URL --table TABLE`` prints, as the report object."""
    client, run = connect(url)
    try:
        return sql_report(
            run,
            table,
            by=by,
            where=where,
            max_length=max_length,
            cost=cost,
            skip_invalid=skip_invalid,
            seed=seed,
            resamples=resamples,
        )
    finally:
        client.close()
