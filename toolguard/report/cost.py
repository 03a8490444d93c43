"""Cost beside reliability (``--cost``): per group, the mean tokens of the model calls and the
mean time spent in tool calls, per trajectory (docs/protocol.md section 7, ``cost``).

- A **model span** is any span carrying ``gen_ai.usage.input_tokens`` or
  ``gen_ai.usage.output_tokens`` with a valid count: an int >= 0, or a string of digits (as
  ClickHouse stores it), below 2**64. Other values are ignored and counted in a warning.
- It belongs to the trajectory whose toolguard spans (call spans or summary span) share its
  trace id. A trace holding spans of several trajectories attributes nothing: its model spans
  are counted in a warning (``cost_unattributed_spans``), never guessed.
- Spans are de-duplicated by (trace id, span id), like every other span; copies of one span
  that disagree take the largest valid count (the largest duration for call spans), so the
  order of reading never matters.
- ``mean_input_tokens`` / ``mean_output_tokens``: the mean, over the group's trajectories with
  at least one attributed model span (``n_with_tokens``), of their per-trajectory sums.
- ``mean_tool_ms``: the mean, over the group's trajectories with at least one call span
  (``n_with_latency``), of the sum of their call spans' durations (end - start), in ms.

Both means are one division of exact integer sums, so the Python and the SQL report print
the same digits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

from .. import _contract as A
from .metrics import TrajectoryRecord

USAGE_INPUT = "gen_ai.usage.input_tokens"
USAGE_OUTPUT = "gen_ai.usage.output_tokens"
MAX_TOKENS = (1 << 64) - 1
_NS_PER_MS = 1_000_000


class Cost(TypedDict):
    """The ``cost`` object of a group (only with ``--cost``)."""

    n_with_tokens: int
    mean_input_tokens: float | None
    mean_output_tokens: float | None
    n_with_latency: int
    mean_tool_ms: float | None


@dataclass
class CostCounts:
    """The sums a ``Cost`` is computed from."""

    n_with_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    n_with_latency: int = 0
    tool_ns: int = 0


def token_count(value: object) -> int | None:
    """A valid token count, or None: an int (not a bool) from 0 to 2**64 - 1, or a string of
    ASCII digits of such a number."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 40:
        n = int(value)
    else:
        return None
    return n if 0 <= n <= MAX_TOKENS else None


def count_cost(records: Iterable[TrajectoryRecord]) -> CostCounts:
    c = CostCounts()
    for r in records:
        if r.input_tokens is not None or r.output_tokens is not None:
            c.n_with_tokens += 1
            c.input_tokens += r.input_tokens or 0
            c.output_tokens += r.output_tokens or 0
        if r.tool_ns is not None:
            c.n_with_latency += 1
            c.tool_ns += r.tool_ns
    return c


def cost_from_counts(c: CostCounts) -> Cost:
    tok = c.n_with_tokens
    return {
        "n_with_tokens": tok,
        "mean_input_tokens": c.input_tokens / tok if tok else None,
        "mean_output_tokens": c.output_tokens / tok if tok else None,
        "n_with_latency": c.n_with_latency,
        "mean_tool_ms": c.tool_ns / (c.n_with_latency * _NS_PER_MS) if c.n_with_latency else None,
    }


def cost_warnings(unattributed: int, invalid: int) -> list[str]:
    out = []
    if unattributed:
        out.append(
            f"cost_unattributed_spans: {unattributed} model-call spans are in traces that hold "
            "spans of several trajectories; their tokens are counted for none of them"
        )
    if invalid:
        out.append(
            f"{invalid} model-call spans have a token count that is not a whole number "
            f"({USAGE_INPUT} / {USAGE_OUTPUT}); those counts are ignored"
        )
    return out


_TID, _STEP, _LEN = A.TRAJECTORY_ID, A.STEP, A.TRAJECTORY_LENGTH


def _token(value: object) -> int | None:
    """A usage attribute: its count, -1 when it holds no valid count, None when absent."""
    if not isinstance(value, dict):
        return None
    raw = value.get("intValue", value.get("stringValue"))
    n = token_count(raw)
    return -1 if n is None else n


def _merge(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _duration(span: dict[str, Any]) -> int:
    try:
        end, start = int(span.get("endTimeUnixNano") or 0), int(span.get("startTimeUnixNano") or 0)
        return max(0, end - start)
    except (TypeError, ValueError):
        return 0  # no readable times: the call span counts, its duration does not


class CostCollector:
    """Folds what ``--cost`` needs from export requests the Collector accepted (so every
    toolguard span in them is well-formed): which trajectory owns each trace, the call spans'
    durations and the model spans' token counts, each span once by its ids. It keeps one entry
    per call span and per model span: memory grows with the spans, which is why cost is only
    read when asked for."""

    def __init__(self) -> None:
        self.owners: dict[str, str | None] = {}  # trace id -> trajectory id (None: several)
        self.calls: dict[tuple[str, str, str], int] = {}  # (tid, trace, span) -> ns
        self.models: dict[tuple[str, str], tuple[int | None, int | None]] = {}
        self.unattributed = 0
        self.invalid = 0

    def feed(self, request: dict[str, Any]) -> None:
        owners, calls, models = self.owners, self.calls, self.models
        for rs in request["resourceSpans"]:
            for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
                for span in ss.get("spans") or ():
                    attrs = span.get("attributes")
                    if not attrs:
                        continue
                    d = {a["key"]: a["value"] for a in attrs}
                    trace = str(span.get("traceId", ""))
                    ident = str(span.get("spanId", ""))
                    tv = d.get(_TID)
                    if tv is not None and (_LEN in d or _STEP in d):
                        tid = str(tv.get("stringValue"))
                        owners[trace] = tid if owners.get(trace, tid) == tid else None
                        if _LEN not in d:
                            key = (tid, trace, ident)
                            dur = _duration(span)
                            if dur > calls.get(key, -1):
                                calls[key] = dur
                    iv, ov = d.get(USAGE_INPUT), d.get(USAGE_OUTPUT)
                    if iv is not None or ov is not None:
                        old_in, old_out = models.get((trace, ident), (None, None))
                        models[(trace, ident)] = (
                            _merge(old_in, _token(iv)),
                            _merge(old_out, _token(ov)),
                        )

    def apply(self, records: Iterable[TrajectoryRecord]) -> list[TrajectoryRecord]:
        """The records with their cost fields filled; sets ``unattributed`` and ``invalid``."""
        tokens: dict[str, list[int]] = {}
        self.unattributed = self.invalid = 0
        for (trace, _), (tin, tout) in self.models.items():
            if trace not in self.owners:
                continue  # no trajectory in that trace: not ours to count
            self.invalid += tin == -1 or tout == -1
            if not ((tin is not None and tin >= 0) or (tout is not None and tout >= 0)):
                continue  # no valid count: not a model span
            owner = self.owners[trace]
            if owner is None:
                self.unattributed += 1
                continue
            sums = tokens.setdefault(owner, [0, 0])
            sums[0] += max(tin or 0, 0)
            sums[1] += max(tout or 0, 0)
        tool: dict[str, int] = {}
        for (tid, _, _), ns in self.calls.items():
            tool[tid] = tool.get(tid, 0) + ns
        out = []
        for r in records:
            found = tokens.get(r.trajectory_id)
            out.append(
                dataclasses.replace(
                    r,
                    input_tokens=None if found is None else found[0],
                    output_tokens=None if found is None else found[1],
                    tool_ns=tool.get(r.trajectory_id),
                )
            )
        return out
