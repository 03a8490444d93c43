"""Cost beside reliability (``--cost``): per group, the mean tokens of the model calls and the
mean time spent in tool calls, per trajectory (docs/protocol.md section 7, ``cost``).

- A **model span** is any span carrying ``gen_ai.usage.input_tokens`` or
  ``gen_ai.usage.output_tokens`` with a valid count: an int >= 0, or a string of digits (as
  ClickHouse stores it), below 2**64. Other values are ignored and counted in a warning.
  OpenInference's spans (Phoenix, its LangChain and LlamaIndex instrumentations) carry
  ``llm.token_count.prompt`` / ``llm.token_count.completion`` instead: each is read where the
  span has no ``gen_ai.usage`` key for the same count (a span carrying both is counted once).
- It belongs to the trajectory whose toolguard spans (call spans or summary span) share its
  trace id, or whose id a span of its trace names in ``langsmith.metadata.toolguard.
  trajectory.id`` (a tracer that makes its spans after the fact, LangSmith's OTel mode: its
  trace is joined to the trajectory; docs/protocol.md section 6.8). A trace holding spans of
  (or naming) several trajectories attributes nothing: its model spans are counted in a
  warning (``cost_unattributed_spans``), never guessed.
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
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

from .. import _contract as A
from .metrics import TrajectoryRecord

USAGE_INPUT = "gen_ai.usage.input_tokens"
USAGE_OUTPUT = "gen_ai.usage.output_tokens"
# OpenInference's names for the same two counts, read where a span has no gen_ai.usage one.
PROMPT_TOKENS = "llm.token_count.prompt"
COMPLETION_TOKENS = "llm.token_count.completion"
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
            f"({USAGE_INPUT} / {USAGE_OUTPUT}, or {PROMPT_TOKENS} / {COMPLETION_TOKENS}); "
            "those counts are ignored"
        )
    return out


_TID, _STEP, _LEN = A.TRAJECTORY_ID, A.STEP, A.TRAJECTORY_LENGTH
_JOINED = A.LANGSMITH_TRAJECTORY_ID


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


# A trace id and a span id as the OTLP JSON mapping writes them (lowercase hex): packed into
# three 64-bit words. Any other spelling is kept as text (the same span twice is then still
# told apart from two spans, as the SQL report, which compares the strings, tells them).
_PACKABLE = re.compile(r"[0-9a-f]{32}:[0-9a-f]{16}")
_WORD = (1 << 64) - 1
_MAX_NS = (1 << 64) - 1
_CallKey = tuple[str, str, str]
_ModelKey = int | tuple[str, str]


def _model_key(trace: str, ident: str) -> _ModelKey:
    if _PACKABLE.fullmatch(f"{trace}:{ident}"):
        return int(trace + ident, 16)  # one int of 192 bits: a third of the two strings
    return (trace, ident)


def _model_trace(key: _ModelKey) -> str:
    return f"{key >> 64:032x}" if isinstance(key, int) else key[0]


class CostCollector:
    """Folds what ``--cost`` needs from export requests the Collector accepted (so every
    toolguard span in them is well-formed): which trajectory owns each trace, the call spans'
    durations and the model spans' token counts, each span once by its ids.

    A call span in its trajectory's first trace costs two 64-bit words in the trajectory's
    array (span id, duration), not a dict entry of three strings (about 370 bytes: a million
    call spans took the report from about 220 MiB to 580 MiB); the copies of one span are told
    apart when the trajectory's costs are summed, one trajectory at a time. A call span in
    another trace (a trajectory across processes) or with ids in another spelling keeps the
    dict entry. A model span costs one dict entry keyed by its packed ids."""

    def __init__(self) -> None:
        self.owners: dict[str, str | None] = {}  # trace id -> trajectory id (None: several)
        # trajectory id -> [its first trace id (hi, lo)], then (span id, duration ns) for each
        # call span read in that trace
        self.calls: dict[str, array[int]] = {}
        self.odd_calls: dict[_CallKey, int] = {}  # other traces, other spellings -> ns
        self.models: dict[_ModelKey, tuple[int | None, int | None]] = {}
        self.unattributed = 0
        self.invalid = 0

    def feed(self, request: dict[str, Any]) -> None:
        owners, calls, odd, models = self.owners, self.calls, self.odd_calls, self.models
        packable = _PACKABLE.fullmatch
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
                            dur = min(_duration(span), _MAX_NS)
                            words = calls.get(tid)
                            packed = packable(f"{trace}:{ident}") is not None
                            if packed and words is None:
                                t = int(trace, 16)
                                words = calls[tid] = array("Q", (t >> 64, t & _WORD))
                            if packed and words is not None and _same_trace(words, trace):
                                words.extend((int(ident, 16), dur))
                            else:
                                key = (tid, trace, ident)
                                if dur > odd.get(key, -1):
                                    odd[key] = dur
                    jv = d.get(_JOINED)
                    if isinstance(jv, dict):  # another tracer's span naming its trajectory
                        named = jv.get("stringValue")
                        if isinstance(named, str) and named:
                            owners[trace] = named if owners.get(trace, named) == named else None
                    iv, ov = d.get(USAGE_INPUT), d.get(USAGE_OUTPUT)
                    if iv is None:
                        iv = d.get(PROMPT_TOKENS)
                    if ov is None:
                        ov = d.get(COMPLETION_TOKENS)
                    if iv is not None or ov is not None:
                        mkey = _model_key(trace, ident)
                        old_in, old_out = models.get(mkey, (None, None))
                        models[mkey] = (
                            _merge(old_in, _token(iv)),
                            _merge(old_out, _token(ov)),
                        )

    def apply(self, records: Iterable[TrajectoryRecord]) -> list[TrajectoryRecord]:
        """The records with their cost fields filled; sets ``unattributed`` and ``invalid``."""
        tokens: dict[str, list[int]] = {}
        self.unattributed = self.invalid = 0
        for mkey, (tin, tout) in self.models.items():
            trace = _model_trace(mkey)
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
        tool = {tid: _tool_ns(words) for tid, words in self.calls.items()}
        for (tid, _, _), ns in self.odd_calls.items():
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


def _same_trace(words: array[int], trace: str) -> bool:
    t = int(trace, 16)
    return words[0] == t >> 64 and words[1] == t & _WORD


def _tool_ns(words: array[int]) -> int:
    """The summed durations of one trajectory's call spans in its first trace, each span once
    (by its id; the copies of one span that disagree count with the longest duration)."""
    ids, durations = words[2::2], words[3::2]
    longest: dict[int, int] = {}
    for key, ns in zip(ids, durations, strict=True):
        if ns >= longest.get(key, -1):
            longest[key] = ns
    if len(longest) == len(durations):
        return sum(durations)  # no span read twice: the sum as read
    return sum(longest.values())
