"""Fold spans into one record per trajectory (the reading rules of PROTOCOL.md section 4).

State is O(1) per trajectory whatever the number of spans: the largest step seen, the smallest
invalid step and its cause, the summary span. Every update is a min, a max or a deterministic
choice between summaries, so a span read twice (the same trace and span id, e.g. two exports
of one batch) cannot change any figure, and no set of span ids has to be kept.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from typing import Any

from .. import _contract as A
from .metrics import TrajectoryRecord
from .reader import ExportRequest, ReadStats, ReportInputError, iter_exports

_NO_STEP = 1 << 62  # "no invalid step seen": larger than any real step, so min() needs no None
_RANK = {c: i for i, c in enumerate(A.CAUSES)}
_LABEL_CUT = len(A.LABEL_PREFIX)
_TID, _STEP, _VALID, _CAUSE, _LEN = (
    A.TRAJECTORY_ID,
    A.STEP,
    A.VALID,
    A.CAUSE,
    A.TRAJECTORY_LENGTH,
)

_AnyValue = dict[str, Any]
"""An OTLP ``AnyValue`` as parsed from JSON (``{"stringValue": ...}``, ``{"intValue": ...}``,
...): its members are unchecked until one of the readers below converts them."""
# A summary span as kept per trajectory: (T, FED, cause, success, sorted label pairs).
_Summary = tuple[int, int, str | None, bool | None, tuple[tuple[str, str], ...]]
_SpanId = tuple[str, str]  # (trace id, span id)


def _rank(cause: str | None) -> int:
    return _RANK.get(cause, len(_RANK)) if cause is not None else len(_RANK) + 1


class _Malformed(Exception):
    """A span that claims to be ours but breaks the contract's types."""


class _Traj:
    __slots__ = ("bad_cause", "bad_step", "max_step", "problems", "summary", "summary_id")

    def __init__(self) -> None:
        self.max_step = 0
        self.bad_step = _NO_STEP
        self.bad_cause: str | None = None
        self.summary: _Summary | None = None
        self.summary_id: _SpanId = ("", "")
        self.problems: set[str] | None = None  # disagreements found while reading

    def problem(self, text: str) -> None:
        if self.problems is None:
            self.problems = set()
        self.problems.add(text)


def _int(value: _AnyValue, key: str) -> int:
    # OTLP JSON writes 64-bit integers as decimal strings; some writers use plain numbers.
    raw = value.get("intValue")
    try:
        if raw is None or isinstance(raw, bool):
            raise ValueError
        return int(raw)
    except (TypeError, ValueError):
        raise _Malformed(f"{key} is not an integer: {value!r}") from None


def _bool(value: _AnyValue, key: str) -> bool:
    raw = value.get("boolValue")
    if not isinstance(raw, bool):
        raise _Malformed(f"{key} is not a boolean: {value!r}")
    return raw


def _str(value: _AnyValue) -> str | None:
    raw: str | None = value.get("stringValue")
    if raw is None:
        for other in ("intValue", "doubleValue", "boolValue"):
            if other in value:
                return str(value[other])
    return raw


def _tid(value: _AnyValue) -> str:
    tid = _str(value)
    if not tid:
        raise _Malformed(f"{A.TRAJECTORY_ID} is empty or not a string: {value!r}")
    return tid


def _bad_call(tid: str, step: int, valid_v: _AnyValue | None) -> str:
    if step < 1:
        return f"{A.STEP} must be >= 1, got {step} (trajectory {tid!r})"
    if valid_v is None:
        return f"call span of trajectory {tid!r} step {step} lacks {A.VALID}"
    return f"{A.VALID} is not a boolean: {valid_v!r}"


def _summary(
    tid: str, d: dict[str, _AnyValue], span: dict[str, Any]
) -> tuple[str, _Summary, _SpanId]:
    length = _int(d[A.TRAJECTORY_LENGTH], A.TRAJECTORY_LENGTH)
    fed_v = d.get(A.TRAJECTORY_FED)
    if fed_v is None:
        raise _Malformed(f"summary span of trajectory {tid!r} lacks {A.TRAJECTORY_FED}")
    fed = _int(fed_v, A.TRAJECTORY_FED)
    if length < 0:
        raise _Malformed(f"{A.TRAJECTORY_LENGTH} must be >= 0, got {length}")
    cause_v = d.get(A.TRAJECTORY_FIRST_ERROR_CAUSE)
    success_v = d.get(A.TRAJECTORY_SUCCESS)
    success = None if success_v is None else _bool(success_v, A.TRAJECTORY_SUCCESS)
    labels = tuple(
        sorted(
            (k[_LABEL_CUT:], _str(v) or "") for k, v in d.items() if k.startswith(A.LABEL_PREFIX)
        )
    )
    ident = (str(span.get("traceId", "")), str(span.get("spanId", "")))
    cause = _str(cause_v) if cause_v is not None else None
    return (tid, (length, fed, cause, success, labels), ident)


class Collector:
    """Feed it export requests, then take the records."""

    def __init__(self) -> None:
        self.trajs: dict[str, _Traj] = {}
        self.spans = 0

    def feed(self, request: ExportRequest) -> None:
        """Fold one export request. Raises _Malformed before changing anything when a span
        breaks the contract, so a skipped line leaves no trace."""
        # The hot loop: no object per span beyond one dict of its attributes and, for our
        # call spans, one small tuple; constants are locals.
        tid_key, step_key, valid_key, cause_key, len_key = _TID, _STEP, _VALID, _CAUSE, _LEN
        calls: list[tuple[str, int, bool, _AnyValue | None]] = []
        summaries: list[tuple[str, _Summary, _SpanId]] = []
        try:
            for rs in request["resourceSpans"]:
                for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
                    spans = ss.get("spans") or ()
                    self.spans += len(spans)
                    for span in spans:
                        attrs = span.get("attributes")
                        if not attrs:
                            continue
                        d: dict[str, _AnyValue] = {a["key"]: a["value"] for a in attrs}
                        tv = d.get(tid_key)
                        if tv is None:
                            continue  # not ours, or a call made outside any trajectory
                        tid = tv.get("stringValue")
                        if tid.__class__ is not str or not tid:
                            tid = _tid(tv)
                        if len_key in d:
                            summaries.append(_summary(tid, d, span))
                            continue
                        sv = d.get(step_key)
                        if sv is None:
                            continue  # some other span of ours: no figure depends on it
                        try:
                            step = int(sv["intValue"])
                        except (KeyError, TypeError, ValueError):
                            raise _Malformed(f"{step_key} is not an integer: {sv!r}") from None
                        vv = d.get(valid_key)
                        valid = vv.get("boolValue") if vv is not None else None
                        if (valid is not True and valid is not False) or step < 1:
                            raise _Malformed(_bad_call(tid, step, vv))
                        calls.append((tid, step, valid, None if valid else d.get(cause_key)))
        except (AttributeError, KeyError, TypeError) as exc:
            raise _Malformed(
                f"not a well-formed trace export ({type(exc).__name__}: {exc})"
            ) from None
        for tid, step, valid, cause_v in calls:
            self._call(tid, step, valid, cause_v)
        for tid, summary, ident in summaries:
            self._summary(tid, summary, ident)

    def _traj(self, tid: str) -> _Traj:
        t = self.trajs.get(tid)
        if t is None:
            t = self.trajs[tid] = _Traj()
        return t

    def _call(self, tid: str, step: int, valid: bool, cause_v: _AnyValue | None) -> None:
        t = self.trajs.get(tid) or self._traj(tid)
        if step > t.max_step:
            t.max_step = step
        if valid or step > t.bad_step:
            return
        cause = None if cause_v is None else _str(cause_v)
        if step < t.bad_step or _rank(cause) < _rank(t.bad_cause):
            # Ties (one step, two causes) resolve by precedence: independent of order.
            t.bad_step, t.bad_cause = step, cause

    def _summary(self, tid: str, summary: _Summary, ident: _SpanId) -> None:
        t = self._traj(tid)
        if t.summary is None:
            t.summary, t.summary_id = summary, ident
            return
        if ident == t.summary_id:
            if summary != t.summary:
                t.problem("two different summaries under one span id")
            return
        t.problem("more than one summary span")
        # Keep the same one whatever the reading order: the smallest (trace id, span id).
        if ident < t.summary_id:
            t.summary, t.summary_id = summary, ident

    def records(self) -> list[TrajectoryRecord]:
        """One record per trajectory id, sorted by id, disagreements attached."""
        return [_record(tid, self.trajs[tid]) for tid in sorted(self.trajs)]


def _record(tid: str, t: _Traj) -> TrajectoryRecord:
    problems = set(t.problems or ())
    bad = None if t.bad_step == _NO_STEP else t.bad_step
    if t.summary is None:
        # No summary: T and FED from the call spans (steps may have been lost: say so).
        length = t.max_step
        fed = length + 1 if bad is None else bad
        return TrajectoryRecord(
            tid, length, fed, t.bad_cause if bad else None, None, {}, True, tuple(sorted(problems))
        )
    length, fed, cause, success, labels = t.summary
    if not 1 <= fed <= length + 1:
        problems.add(f"summary FED out of range: FED {fed} with T {length}")
        fed = min(max(fed, 1), length + 1)
    if t.max_step > length:
        problems.add(f"call step beyond the summary's length: step {t.max_step} > T {length}")
    if bad is not None and bad < fed:
        problems.add(f"invalid call before the summary's FED: step {bad} < FED {fed}")
    elif bad == fed and t.bad_cause is not None:
        if cause is None:
            cause = t.bad_cause  # the summary omitted it; the call span still knows
        elif cause != t.bad_cause:
            problems.add(f"cause differs from the call span's: {cause} vs {t.bad_cause}")
    if fed > length:
        cause = None
    return TrajectoryRecord(
        tid, length, fed, cause, success, dict(labels), False, tuple(sorted(problems))
    )


def read_records(
    patterns: Iterable[str],
    *,
    skip_invalid: bool = False,
    progress: bool | None = False,
) -> tuple[list[TrajectoryRecord], ReadStats]:
    """Read OTLP JSON Lines files (globs, `-`, `.gz`) into trajectory records.

    Raises ReportInputError on a malformed line (unless ``skip_invalid``) and when the input
    holds no toolguard trajectory at all."""
    stats = ReadStats()
    col = Collector()
    # Each parsed line is tens of thousands of short-lived containers, freed by reference
    # counting alone (nothing here makes a cycle); the cyclic collector would only walk them
    # again and again, which costs about half of the parse time. Off for the read, restored.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for request, where in iter_exports(
            patterns, stats, skip_invalid=skip_invalid, progress=progress
        ):
            try:
                col.feed(request)
            except _Malformed as exc:
                if not skip_invalid:
                    raise ReportInputError(f"{where}: {exc}") from None
                stats.skip(where, str(exc))
    finally:
        if gc_was_on:
            gc.enable()
    stats.spans = col.spans
    if not col.trajs:
        files = ", ".join(stats.files)
        if stats.lines == stats.skipped and not col.spans:
            what = "is empty" if not stats.lines else "holds no valid line"
            raise ReportInputError(f"the input ({files}) {what}: no spans to report on")
        raise ReportInputError(
            f"no toolguard trajectory in the input ({files}): {col.spans} spans read, none "
            f"carries {A.TRAJECTORY_ID} with {A.STEP} or {A.TRAJECTORY_LENGTH}"
        )
    return col.records(), stats
