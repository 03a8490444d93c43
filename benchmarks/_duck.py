"""What a user would do instead of `toolguard report`: DuckDB over the same OTLP JSON Lines.

TER and mean FED computed per trajectory from the call spans, in SQL: T = the largest step,
FED = the smallest invalid step (T + 1 when there is none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

QUERY = """
WITH spans AS (
    SELECT unnest(ss.spans) AS s
    FROM (SELECT unnest(rs.scopeSpans) AS ss
          FROM (SELECT unnest(resourceSpans) AS rs
                FROM read_json(?, format = 'newline_delimited',
                               maximum_object_size = 1073741824)))
),
calls AS (
    SELECT
        list_filter(s.attributes, lambda a: a.key = 'toolguard.trajectory.id')[1]
            .value.stringValue AS trajectory,
        CAST(list_filter(s.attributes, lambda a: a.key = 'toolguard.step')[1]
            .value.intValue AS BIGINT) AS step,
        list_filter(s.attributes, lambda a: a.key = 'toolguard.valid')[1]
            .value.boolValue AS valid
    FROM spans
    WHERE s.name LIKE 'execute_tool %'
),
per_trajectory AS (
    SELECT trajectory, max(step) AS t,
           coalesce(min(step) FILTER (WHERE NOT valid), max(step) + 1) AS fed
    FROM calls
    GROUP BY trajectory
)
SELECT avg(CASE WHEN fed = t + 1 THEN 1.0 ELSE 0.0 END) AS ter,
       avg(fed) AS mean_fed,
       count(*) AS n
FROM per_trajectory
"""


def ter_mean_fed(path: Path, con: Any) -> tuple[float, float, int]:
    ter, mean_fed, n = con.execute(QUERY, [str(path)]).fetchone()
    return float(ter), float(mean_fed), int(n)
