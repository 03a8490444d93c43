"""The ``--cost`` parts of the report query (clickhouse_sql.py): each span's token counts and
duration, the trajectory each model span's tokens go to, and their sums per group, as
cost.py counts them for the Python report.
"""

from __future__ import annotations

USAGE_INPUT = "gen_ai.usage.input_tokens"
USAGE_OUTPUT = "gen_ai.usage.output_tokens"
PROMPT_TOKENS = "llm.token_count.prompt"  # OpenInference's, read where gen_ai.usage is absent
COMPLETION_TOKENS = "llm.token_count.completion"
_DIGITS = "'^[0-9]+$'"  # a token count: a string of digits


def cost_columns(inp: str, out: str, alt_in: str, alt_out: str, joined: str) -> str:
    """A span's two token counts: the ``gen_ai.usage`` key where the span has it, else
    OpenInference's (``alt_in`` / ``alt_out``), as cost.py reads them; and the trajectory
    another tracer's span names for its trace (``joined``: docs/protocol.md section 6.8)."""
    return f""",
        Duration AS dur,
        a[{joined}] AS joined_tid,
        mapContains(a, {inp}) OR mapContains(a, {alt_in}) AS has_in,
        mapContains(a, {out}) OR mapContains(a, {alt_out}) AS has_out,
        if(mapContains(a, {inp}), a[{inp}], a[{alt_in}]) AS in_s,
        if(mapContains(a, {out}), a[{out}], a[{alt_out}]) AS out_s,
        has_in AND match(in_s, {_DIGITS}) AND toUInt64OrNull(in_s) IS NOT NULL AS in_ok,
        has_out AND match(out_s, {_DIGITS}) AND toUInt64OrNull(out_s) IS NOT NULL AS out_ok,
        if(in_ok, toUInt64(in_s), 0) AS in_v,
        if(out_ok, toUInt64(out_s), 0) AS out_v"""


def cost_ctes() -> str:
    """Which trajectory each trace belongs to, by its toolguard spans and by other tracers'
    spans naming one (none when it holds or names several), and the model spans,
    de-duplicated by (trace id, span id): a token count is valid when some copy holds
    digits, invalid when a copy holds something else and none holds digits."""
    return """
owners AS (
    SELECT trace_id, uniqExact(o) AS n_tids, any(o) AS owner
    FROM (
        SELECT trace_id, tid AS o FROM spans WHERE ok
        UNION ALL
        SELECT trace_id, joined_tid AS o FROM spans WHERE joined_tid != ''
    )
    GROUP BY trace_id
),
model AS (
    SELECT trace_id, span_id,
        max(in_ok) AS any_in_ok, max(has_in AND NOT in_ok) AS any_in_bad,
        max(out_ok) AS any_out_ok, max(has_out AND NOT out_ok) AS any_out_bad,
        maxIf(in_v, in_ok) AS m_in, maxIf(out_v, out_ok) AS m_out,
        any_in_ok OR any_out_ok AS is_model,
        (any_in_bad AND NOT any_in_ok) OR (any_out_bad AND NOT any_out_ok) AS invalid
    FROM spans WHERE has_in OR has_out GROUP BY trace_id, span_id
),
model_owned AS (
    SELECT trace_id, n_tids, owner, m_in, m_out, is_model, invalid
    FROM model INNER JOIN owners USING trace_id
),"""


def tokens_join() -> str:
    """Model spans (any span with a valid token count), de-duplicated by (trace id, span id),
    given to the one trajectory whose toolguard spans share their trace."""
    return """
    LEFT JOIN (
        SELECT owner AS tid, 1 AS tokens_hit,
               sum(toUInt128(m_in)) AS tokens_in, sum(toUInt128(m_out)) AS tokens_out
        FROM model_owned
        WHERE n_tids = 1 AND is_model
        GROUP BY owner
    ) AS tok USING tid"""


def cost_results() -> str:
    return """,
    countIf(tokens_hit = 1) AS n_with_tokens,
    sumIf(tokens_in, tokens_hit = 1) AS input_tokens,
    sumIf(tokens_out, tokens_hit = 1) AS output_tokens,
    countIf(calls > 0) AS n_with_latency,
    sumIf(toUInt128(tool_ns), calls > 0) AS tool_ns_total,
    (SELECT countIf(n_tids > 1 AND is_model) FROM model_owned) AS cost_unattributed_spans,
    (SELECT countIf(invalid) FROM model_owned) AS cost_invalid_spans"""
