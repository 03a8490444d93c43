"""The report as one ClickHouse query over ``otel_traces`` (the OpenTelemetry Collector's
ClickHouse exporter table): the reading rules of docs/protocol.md section 5 and the counts
behind every figure of section 3, per ``--by`` group and overall.

The query reads four columns: ``TraceId``, ``SpanId``, ``SpanAttributes`` (every attribute as
a string: section 6.5) and, for ``--cost``, ``Duration``. Its stages:

1. ``spans``: each span with ``toolguard.trajectory.id`` classified (summary span: it has
   ``toolguard.trajectory.length``; call span: ``toolguard.step``) and checked against the
   contract's types and bounds (docs/report-limits.md); a span that breaks them gets a
   ``problem`` and takes no part in any figure;
2. ``idents``: one row per trajectory and span id where a span id matters (summaries, and call
   spans for ``--cost``), so a span exported twice counts once; call spans without cost fold
   into one row per trajectory (a min and a max need no de-duplication);
3. ``traj``: one row per trajectory id: the summary with the smallest (trace id, span id), the
   largest step, the first invalid step and its cause (ties by cause precedence), and the
   disagreements the Python reader reports;
4. the result: per group (``GROUPING SETS``: each label combination, then everything) the
   counts and histograms ``metrics.CohortCounts`` holds, the PEC arrays, the ratios, and the
   facts the warnings name (counts and the three smallest trajectory ids of each kind).

Label keys are inlined as ``unhex('...')`` of their UTF-8 bytes, so no key can change the
query's text; ``where`` is the user's own SQL condition on their own table, passed through
as written (docs/protocol.md section 8). Numbers are computed from integers: the Python side
(clickhouse.py) divides and bootstraps, with the code the Python report uses. The ``--cost``
columns, tables and sums are clickhouse_sql_cost.py's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .. import _contract as A
from .clickhouse_sql_cost import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    USAGE_INPUT,
    USAGE_OUTPUT,
    cost_columns,
    cost_ctes,
    cost_results,
    tokens_join,
)

AUC_SHIFT = 1 << 32
"""(FED - 1, T) pairs travel as one integer, (FED - 1) * AUC_SHIFT + T: both are below it
(docs/report-limits.md bounds them by --max-length)."""
_INT = "'^[+-]?[0-9]+$'"  # a decimal integer as the Python reader accepts it
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def quote_table(name: str) -> str:
    """``table`` or ``database.table`` as a quoted identifier; anything else is refused
    (ValueError), so a table name cannot carry SQL."""
    if not _TABLE.fullmatch(name):
        raise ValueError(
            f"table name {name!r}: letters, digits and underscores, optionally "
            "database.table (create a view to read a table with another name)"
        )
    return ".".join(f"`{part}`" for part in name.split("."))


def _lit(text: str) -> str:
    """One of our own constants as a string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _hex(text: str) -> str:
    """Any text (a user's label key) as an expression whose SQL is hex digits only."""
    return f"unhex('{text.encode().hex()}')"


def _shown(value: str) -> str:
    """A value quoted in an error message, cut to 200 characters."""
    return f"concat('\"', substring({value}, 1, 200), '\"')"


def _int_check(value: str) -> str:
    return (
        f"match({value}, {_INT}) AND length({value}) <= 400 AND toInt64OrNull({value}) IS NOT NULL"
    )


def report_query(
    table: str,
    *,
    by: Sequence[str] = (),
    where: str | None = None,
    max_length: int = 100_000,
    cost: bool = False,
) -> str:
    """The query: one row per group (``group_labels`` holds the ``by`` values, null for a
    missing label) and, when ``by`` is given, one row for everything (``group_labels``
    empty); each for ``used`` = 1, and again for ``used`` = 0 when some trajectory has only
    spans that break the contract (those rows carry only ``problems``)."""
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    tid, step, valid, cause = (_lit(k) for k in (A.TRAJECTORY_ID, A.STEP, A.VALID, A.CAUSE))
    length, fed = _lit(A.TRAJECTORY_LENGTH), _lit(A.TRAJECTORY_FED)
    s_cause, success = _lit(A.TRAJECTORY_FIRST_ERROR_CAUSE), _lit(A.TRAJECTORY_SUCCESS)
    prefix = _lit(A.LABEL_PREFIX)
    inp, out = _lit(USAGE_INPUT), _lit(USAGE_OUTPUT)
    alt_in, alt_out = _lit(PROMPT_TOKENS), _lit(COMPLETION_TOKENS)
    ranks = "[" + ", ".join(_lit(c) for c in A.CAUSES) + "]"
    keys = "[" + ", ".join(_hex(k) for k in by) + "]" if by else "CAST([], 'Array(String)')"
    user = f"({where})" if where and where.strip() else "1"
    joined = _lit(A.LANGSMITH_TRAJECTORY_ID)
    wanted = f"mapContains(SpanAttributes, {tid})"
    if cost:
        keys_read = (inp, out, alt_in, alt_out, joined)
        wanted += "".join(f" OR mapContains(SpanAttributes, {key})" for key in keys_read)
    limit = max_length
    # Where a span id is kept apart: summaries always, call spans only for their durations.
    kept = "kind = 's' OR kind = 'c'" if cost else "kind = 's'"
    sql = f"""
WITH raw AS (
    SELECT
        TraceId AS trace_id,
        SpanId AS span_id,
        SpanAttributes AS a,
        mapContains(a, {tid}) AS has_tid,
        a[{tid}] AS tid,
        multiIf(NOT has_tid, '', mapContains(a, {length}), 's',
                mapContains(a, {step}), 'c', '') AS kind,
        a[{step}] AS step_s,
        a[{valid}] AS valid_s,
        mapContains(a, {valid}) AS has_valid,
        a[{length}] AS len_s,
        a[{fed}] AS fed_s,
        mapContains(a, {fed}) AS has_fed,
        a[{success}] AS success_s,
        mapContains(a, {success}) AS has_success,
        mapContains(a, {cause}) AS has_cause,
        a[{cause}] AS cause_s,
        mapContains(a, {s_cause}) AS has_s_cause,
        a[{s_cause}] AS s_cause_s,
        arrayFilter(kv -> startsWith(kv.1, {prefix}),
            arrayZip(CAST(mapKeys(a), 'Array(String)'), mapValues(a))) AS label_kvs
        {cost_columns(inp, out, alt_in, alt_out, joined) if cost else ""}
    FROM {quote_table(table)}
    WHERE ({wanted}) AND {user}
),
nums AS (
    SELECT *,
        if({_int_check("step_s")}, toInt64OrNull(step_s), NULL) AS step_n,
        if({_int_check("len_s")}, toInt64OrNull(len_s), NULL) AS len_n,
        if({_int_check("fed_s")}, toInt64OrNull(fed_s), NULL) AS fed_n
    FROM raw
),
spans AS (
    SELECT *,
        multiIf(
            NOT has_tid, '',
            tid = '', concat({_lit(A.TRAJECTORY_ID)}, ' is empty'),
            kind = 's' AND len_n IS NULL,
                concat({length}, ' is not an integer: ', {_shown("len_s")}),
            kind = 's' AND NOT has_fed, concat('summary span lacks ', {fed}),
            kind = 's' AND fed_n IS NULL,
                concat({fed}, ' is not an integer: ', {_shown("fed_s")}),
            kind = 's' AND len_n < 0, concat({length}, ' must be >= 0, got ', len_s),
            kind = 's' AND len_n > {limit},
                concat({length}, ' exceeds the maximum trajectory length: ', len_s),
            kind = 's' AND fed_n < 1, concat({fed}, ' must be >= 1, got ', fed_s),
            kind = 's' AND fed_n > {limit + 1},
                concat({fed}, ' exceeds the maximum trajectory length: ', fed_s),
            kind = 's' AND has_success AND success_s NOT IN ('true', 'false'),
                concat({success}, ' is not a boolean: ', {_shown("success_s")}),
            kind = 'c' AND step_n IS NULL,
                concat({step}, ' is not an integer: ', {_shown("step_s")}),
            kind = 'c' AND step_n < 1, concat({step}, ' must be >= 1, got ', step_s),
            kind = 'c' AND step_n > {limit},
                concat({step}, ' exceeds the maximum trajectory length: ', step_s),
            kind = 'c' AND NOT has_valid, concat('call span lacks ', {valid}),
            kind = 'c' AND valid_s NOT IN ('true', 'false'),
                concat({valid}, ' is not a boolean: ', {_shown("valid_s")}),
            '') AS problem,
        kind != '' AND problem = '' AS ok,
        -- a call span's failure: (step, cause rank, cause); rank 5 = an unknown word,
        -- 6 = no cause at all, so min() takes the precedence order and is order-free.
        (toInt64(ifNull(step_n, 0)),
         if(has_cause, if(has({ranks}, cause_s), indexOf({ranks}, cause_s) - 1, 5), 6),
         cause_s) AS failure,
        -- a summary: (T, FED, has cause, cause, success -1/0/1, sorted label pairs)
        (toInt64(ifNull(len_n, 0)), toInt64(ifNull(fed_n, 0)), toUInt8(has_s_cause),
         s_cause_s, toInt8(if(has_success, success_s = 'true', -1)),
         arraySort(arrayMap(kv -> (substring(kv.1, {len(A.LABEL_PREFIX) + 1}), kv.2),
             label_kvs))) AS content
    FROM nums
),{cost_ctes() if cost else ""}
idents AS (
    SELECT
        tid,
        if({kept}, trace_id, '') AS tr,
        if({kept}, span_id, '') AS sp,
        countIf(ok AND kind = 'c') AS calls,
        maxIf(failure.1, ok AND kind = 'c') AS max_step,
        countIf(ok AND kind = 'c' AND valid_s = 'false') AS n_bad,
        minIf(failure, ok AND kind = 'c' AND valid_s = 'false') AS bad,
        countIf(ok AND kind = 's') AS n_sum,
        minIf(content, ok AND kind = 's') AS content_min,
        maxIf(content, ok AND kind = 's') AS content_max,
        countIf(problem != '') AS n_problem,
        minIf((trace_id, span_id, problem), problem != '') AS first_problem
        {", maxIf(dur, ok AND kind = 'c') AS i_dur" if cost else ""}
    FROM spans
    WHERE has_tid
    GROUP BY tid, tr, sp
),
traj AS (
    SELECT
        tid,
        sum(calls) AS t_calls,
        max(max_step) AS t_max_step,
        sum(n_bad) > 0 AS has_bad,
        minIf(bad, n_bad > 0) AS bad_t,
        countIf(n_sum > 0) AS summary_spans,
        argMinIf(content_min, (tr, sp), n_sum > 0) AS summary,
        maxIf(content_min != content_max, n_sum > 0) AS conflict,
        sum(n_problem) AS t_problems,
        minIf(first_problem, n_problem > 0) AS t_first_problem,
        t_calls + sum(n_sum) > 0 AS used
        {", sum(i_dur) AS tool_ns" if cost else ""}
    FROM idents
    GROUP BY tid
),
rec0 AS (
    SELECT
        tid, t_calls AS calls, t_max_step AS max_step, summary_spans, used, has_bad,
        t_problems, t_first_problem, conflict,
        summary_spans = 0 AS incomplete,
        bad_t.1 AS bad_step,
        if(has_bad AND bad_t.2 != 6, bad_t.3, NULL) AS bad_cause,
        summary.1 AS s_t,
        summary.2 AS s_fed,
        if(summary.3 = 1, summary.4, NULL) AS s_cause,
        if(incomplete OR summary.5 < 0, NULL, toUInt8(summary.5)) AS success,
        if(incomplete, CAST([], 'Array(Tuple(String, String))'), summary.6) AS labels
        {", tool_ns, tokens_hit, tokens_in, tokens_out" if cost else ""}
    FROM traj
    {tokens_join() if cost else ""}
),
rec1 AS (
    SELECT *,
        if(incomplete, max_step, s_t) AS t,
        if(incomplete, if(has_bad, bad_step, max_step + 1), least(s_fed, s_t + 1)) AS fed
    FROM rec0
),
rec AS (
    SELECT *,
        NOT incomplete AND s_fed > s_t + 1 AS fed_out_of_range,
        NOT incomplete AND max_step > s_t AS step_beyond,
        NOT incomplete AND has_bad AND bad_step < fed AS bad_before,
        NOT incomplete AND has_bad AND bad_step = fed AS fills,
        fills AND bad_cause IS NOT NULL AND s_cause IS NOT NULL AND s_cause != bad_cause
            AS cause_differs,
        multiIf(
            fed > t, NULL,
            incomplete, if(has_bad, bad_cause, NULL),
            fills AND s_cause IS NULL, bad_cause,
            s_cause) AS cause,
        NOT incomplete AND conflict AS two_summaries,
        fed_out_of_range OR step_beyond OR bad_before OR cause_differs OR two_summaries
            OR summary_spans > 1 AS disagrees,
        arrayMap(k -> if(has(arrayMap(x -> x.1, labels), k),
            labels[indexOf(arrayMap(x -> x.1, labels), k)].2, NULL),
            {keys}) AS gkey
    FROM rec1
),
agg AS (
    SELECT
        used,
        gkey AS group_labels,
        count() AS n,
        countIf(fed = t + 1) AS n_executable,
        countIf(success IS NOT NULL) AS n_outcome_known,
        countIf(success = 1) AS n_success,
        countIf(fed <= t AND success IS NOT NULL) AS rr_eligible,
        countIf(fed <= t AND success = 1) AS rr_success,
        countIf(fed = t + 1 AND success IS NOT NULL) AS s_eligible,
        countIf(fed = t + 1 AND success = 1) AS s_success,
        countIf(incomplete) AS n_incomplete,
        countIf(disagrees) AS n_disagreements,
        sumMapIf([ifNull(cause, '')], [toUInt64(1)], fed <= t) AS causes,
        sumMap([fed], [toUInt64(1)]) AS feds,
        sumMapIf([(fed - 1) * {AUC_SHIFT} + t], [toUInt64(1)], t >= 1) AS aucs,
        sumMap([toUInt64(t)], [toUInt64(1)]) AS t_hist,
        sumMap([toUInt64(least(fed - 1, t))], [toUInt64(1)]) AS survive_hist,
        toUInt64(max(t)) AS k,
        sum(fed) AS fed_sum,
        avgIf((fed - 1) / t, t >= 1) AS auc_pec,
        -- what the warnings name
        sum(t_problems) AS problems,
        minIf(t_first_problem, t_problems > 0) AS problem_first,
        groupArraySortedIf(3)(tid, incomplete) AS incomplete_ids,
        countIf(summary_spans > 1) AS several,
        minIf((tid, summary_spans), summary_spans > 1) AS several_first,
        countIf(calls < t AND summary_spans <= 1) AS short,
        groupArraySortedIf(3)((tid, calls, t), calls < t AND summary_spans <= 1) AS short_ids,
        countIf(fed_out_of_range) AS n_fed_out_of_range,
        groupArraySortedIf(3)((tid, concat('FED ', toString(s_fed), ' with T ', toString(s_t))),
            fed_out_of_range) AS fed_out_of_range_ids,
        countIf(step_beyond) AS n_step_beyond,
        groupArraySortedIf(3)((tid, concat('step ', toString(max_step), ' > T ', toString(s_t))),
            step_beyond) AS step_beyond_ids,
        countIf(bad_before) AS n_bad_before,
        groupArraySortedIf(3)((tid, concat('step ', toString(bad_step), ' < FED ', toString(fed))),
            bad_before) AS bad_before_ids,
        countIf(cause_differs) AS n_cause_differs,
        groupArraySortedIf(3)((tid, concat(s_cause, ' vs ', bad_cause)), cause_differs)
            AS cause_differs_ids,
        countIf(two_summaries) AS n_two_summaries,
        groupArraySortedIf(3)(tid, two_summaries) AS two_summaries_ids,
        sumForEach(arrayMap(x -> toUInt64(x IS NULL), gkey)) AS missing_labels,
        {_missing_ids(len(by))} AS missing_label_ids
        {cost_results() if cost else ""}
    FROM rec
    -- Trajectories with no usable span (only spans that break the contract) are kept apart
    -- (used = 0): they count only in `problems`.
    GROUP BY {"GROUPING SETS ((used, gkey), (used))" if by else "used, gkey"}
),
depths AS (
    SELECT *,
        {_depths("t_hist")} AS n_at_depth,
        {_depths("survive_hist")} AS survive
    FROM agg
)
SELECT *,
    -- the ratios, for whoever runs this query alone (the report divides the counts itself)
    n_executable / n AS ter,
    fed_sum / n AS mean_fed,
    arrayMap(x -> x / n, survive) AS pec,
    arrayMap((x, d) -> if(d = 0, NULL, x / d), survive, n_at_depth) AS pec_elig,
    if(n_outcome_known = 0, NULL, n_success / n_outcome_known) AS final_success,
    if(rr_eligible = 0, NULL, rr_success / rr_eligible) AS rr,
    if(s_eligible = 0, NULL, s_success / s_eligible) AS s
FROM depths
"""
    return sql


def _depths(hist: str) -> str:
    """The per-depth counts #{end >= k}, k = 1 .. K (K = the largest T of the group), from a
    histogram of end points (a sumMap: sorted ends, counts): each depth takes the count of
    trajectories ending at or beyond the next end point, written out as runs (O(K + distinct
    end points), never O(N * K))."""
    return (
        "arrayResize(arrayFlatten(arrayMap((e, p, c) -> arrayWithConstant(e - p, c), "
        f"{hist}.1, arrayPushFront(arrayPopBack({hist}.1), toUInt64(0)), "
        f"arrayReverse(arrayCumSum(arrayReverse({hist}.2))))), k, toUInt64(0))"
    )


def _missing_ids(keys: int) -> str:
    parts = [f"groupArraySortedIf(3)(tid, gkey[{i}] IS NULL)" for i in range(1, keys + 1)]
    return "[" + ", ".join(parts) + "]" if parts else "CAST([], 'Array(Array(String))')"
