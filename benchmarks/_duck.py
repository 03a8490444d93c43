"""What a user would do instead of `toolguard report`: DuckDB over the same OTLP JSON Lines,
computing the same metrics per group (model, method) and overall.

The reading rules in SQL, as far as figures go: trajectories keyed by their id; the summary
span with the smallest (trace id, span id) decides T, FED and Y (FED clamped to T + 1, the
cause filled from the call span at FED when the summary has none); without a summary, T is the
largest step and FED the smallest invalid step. Call spans fold by min and max, so a span read
twice changes nothing. Then n, TER, mean FED, AUC-PEC and n_empty, PEC, PEC-eligible and
n_at_depth, final success, RR and RR-eligible, S, the five causes and the incomplete count.
Not computed here: bootstrap intervals and the warnings' findings (the report has both)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolguard import _contract as A


def _attr(key: str, member: str) -> str:
    return f"list_filter(s.attributes, lambda a: a.key = '{key}')[1].value.{member}"


QUERY = f"""
WITH spans AS (
    SELECT unnest(ss.spans) AS s
    FROM (SELECT unnest(rs.scopeSpans) AS ss
          FROM (SELECT unnest(resourceSpans) AS rs
                FROM read_json(?, format = 'newline_delimited',
                               maximum_object_size = 1073741824)))
),
flat AS (
    SELECT
        s.traceId AS trace_id,
        s.spanId AS span_id,
        {_attr(A.TRAJECTORY_ID, "stringValue")} AS tid,
        TRY_CAST({_attr(A.STEP, "intValue")} AS BIGINT) AS step,
        {_attr(A.VALID, "boolValue")} AS valid,
        {_attr(A.CAUSE, "stringValue")} AS cause,
        TRY_CAST({_attr(A.TRAJECTORY_LENGTH, "intValue")} AS BIGINT) AS t,
        TRY_CAST({_attr(A.TRAJECTORY_FED, "intValue")} AS BIGINT) AS fed,
        {_attr(A.TRAJECTORY_FIRST_ERROR_CAUSE, "stringValue")} AS s_cause,
        {_attr(A.TRAJECTORY_SUCCESS, "boolValue")} AS success,
        {_attr(A.LABEL_PREFIX + "model", "stringValue")} AS model,
        {_attr(A.LABEL_PREFIX + "method", "stringValue")} AS method
    FROM spans
),
summaries AS (
    SELECT DISTINCT ON (tid) tid, t, fed, s_cause, success, model, method
    FROM flat
    WHERE tid IS NOT NULL AND t IS NOT NULL
    ORDER BY tid, trace_id, span_id
),
calls AS (
    SELECT tid, max(step) AS max_step,
           min(step) FILTER (WHERE NOT valid) AS bad_step,
           arg_min(cause, step) FILTER (WHERE NOT valid) AS bad_cause
    FROM flat
    WHERE tid IS NOT NULL AND t IS NULL AND step IS NOT NULL
    GROUP BY tid
),
traj0 AS (
    SELECT
        s.tid IS NULL AS incomplete,
        CASE WHEN s.tid IS NULL THEN c.max_step ELSE s.t END AS t,
        CASE WHEN s.tid IS NULL THEN coalesce(c.bad_step, c.max_step + 1)
             ELSE least(s.fed, s.t + 1) END AS fed,
        s.s_cause, c.bad_step, c.bad_cause, s.success, s.model, s.method
    FROM summaries AS s FULL OUTER JOIN calls AS c ON s.tid = c.tid
),
traj AS (
    SELECT *,
        CASE WHEN fed > t THEN NULL
             WHEN incomplete THEN bad_cause
             WHEN s_cause IS NULL AND bad_step = fed THEN bad_cause
             ELSE s_cause END AS cause
    FROM traj0
),
groups AS (
    SELECT
        model, method, GROUPING(model, method) AS whole,
        count(*) AS n,
        count(*) FILTER (WHERE fed = t + 1) AS n_executable,
        sum(fed) AS fed_sum,
        avg((fed - 1) / t) FILTER (WHERE t >= 1) AS auc_pec,
        count(*) FILTER (WHERE t = 0) AS n_empty,
        count(success) AS n_outcome_known,
        count(*) FILTER (WHERE success) AS n_success,
        count(success) FILTER (WHERE fed <= t) AS rr_eligible,
        count(*) FILTER (WHERE fed <= t AND success) AS rr_success,
        count(success) FILTER (WHERE fed = t + 1) AS s_eligible,
        count(*) FILTER (WHERE fed = t + 1 AND success) AS s_success,
        {
    ", ".join(f"count(*) FILTER (WHERE fed <= t AND cause = '{c}') AS cause_{c}" for c in A.CAUSES)
},
        count(*) FILTER (WHERE incomplete) AS incomplete,
        list(t) AS ts,
        list(least(fed - 1, t)) AS ends,
        max(t) AS k
    FROM traj
    GROUP BY GROUPING SETS ((model, method), ())
)
SELECT
    model, method, whole, n, n_empty, n_outcome_known, rr_eligible, incomplete,
    n_executable / n AS ter,
    fed_sum / n AS mean_fed,
    auc_pec,
    list_transform(range(1, k + 1), lambda d: len(list_filter(ends, lambda e: e >= d)) / n) AS pec,
    list_transform(range(1, k + 1), lambda d: len(list_filter(ts, lambda e: e >= d))) AS n_at_depth,
    list_transform(range(1, k + 1),
        lambda d: len(list_filter(ends, lambda e: e >= d))
            / len(list_filter(ts, lambda e: e >= d)))
        AS pec_elig,
    CASE WHEN n_outcome_known = 0 THEN NULL ELSE n_success / n_outcome_known END
        AS final_success,
    CASE WHEN rr_eligible = 0 THEN NULL ELSE rr_success / rr_eligible END AS rr,
    CASE WHEN s_eligible = 0 THEN NULL ELSE s_success / s_eligible END AS s,
    {", ".join(f"cause_{c}" for c in A.CAUSES)}
FROM groups
ORDER BY whole, model, method
"""

FIELDS = (
    "n",
    "ter",
    "mean_fed",
    "auc_pec",
    "n_empty",
    "pec",
    "pec_elig",
    "n_at_depth",
    "final_success",
    "n_outcome_known",
    "rr",
    "rr_eligible",
    "s",
    "incomplete",
)


def duck_report(path: Path, con: Any) -> dict[str, Any]:
    """``{"groups": [...], "overall": {...}}`` with the FIELDS and ``causes`` of each."""
    cur = con.execute(QUERY, [str(path)])
    names = [d[0] for d in cur.description]
    groups, overall = [], {}
    for values in cur.fetchall():
        row = dict(zip(names, values, strict=True))
        out: dict[str, Any] = {k: row[k] for k in FIELDS}
        out["causes"] = {c: row[f"cause_{c}"] for c in A.CAUSES}
        if row["whole"]:
            overall = out
        else:
            out["labels"] = {"model": row["model"], "method": row["method"]}
            groups.append(out)
    return {"groups": groups, "overall": overall}


def ter_mean_fed(path: Path, con: Any) -> tuple[float, float, int]:
    """The whole cohort's TER and mean FED, and its size, out of ``duck_report`` (which
    computes every metric: the timing covers them all)."""
    overall = duck_report(path, con)["overall"]
    return float(overall["ter"]), float(overall["mean_fed"]), int(overall["n"])


def same_figures(duck: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """Where DuckDB's figures differ from the report's (empty: none). AUC-PEC is compared up to
    float summation order; every other figure exactly."""
    diffs = []
    pairs = [("overall", duck["overall"], report["overall"])]
    want = {(g["labels"].get("model"), g["labels"].get("method")): g for g in report["groups"]}
    for g in duck["groups"]:
        key = (g["labels"]["model"], g["labels"]["method"])
        if key not in want:
            diffs.append(f"group {key}: not in the report")
            continue
        pairs.append((str(key), g, want[key]))
    for name, got, exp in pairs:
        for k in FIELDS:
            a, b = got[k], exp[k]
            if k == "auc_pec" and a is not None and b is not None:
                if abs(a - b) > 1e-12 * max(1.0, abs(b)):
                    diffs.append(f"{name} {k}: {a} vs {b}")
            elif a != b:
                diffs.append(f"{name} {k}: {a} vs {b}")
        if got["causes"] != {c: exp["causes"][c] for c in A.CAUSES}:
            diffs.append(f"{name} causes: {got['causes']} vs {exp['causes']}")
    return diffs
