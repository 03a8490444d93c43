"""Fold spans into one record per trajectory (the reading rules of docs/protocol.md section 4).

State is O(1) per trajectory whatever the number of spans: the largest step seen, the smallest
invalid step and its cause, the summary span, and a count of call spans. Every update is a
min, a max or a deterministic choice between summaries, so a span read twice (the same trace
and span id, e.g. two exports of one batch) cannot change any figure, and no set of call span
ids has to be kept. (The count of call spans is the one thing a repeated span changes: it only
feeds the "fewer call spans than their length" warning. The ids of a trajectory's summary spans
are kept only when it has more than one: runs appended to one file.)

Every value read is checked against the contract's types and bounds before anything is kept
(docs/report-limits.md): a span that breaks them makes its line a ``file:line`` input error, or
with ``skip_invalid`` is left out on its own.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import _contract as A
from .escape import short_id
from .findings import (
    BAD_BEFORE,
    CAUSE_DIFFERS,
    FED_OUT_OF_RANGE,
    MORE_THAN_ONE_SUMMARY,
    STEP_BEYOND,
    TWO_SUMMARIES,
)
from .metrics import CONTENT_CUT, FirstError, TrajectoryRecord
from .reader import (
    ExportRequest,
)
from .span_values import (
    AnyValue,
    Malformed,
    bool_value,
    int_value,
    step_value,
    str_value,
    text,
    too_long,
    trajectory_id,
)

DEFAULT_MAX_LENGTH = 100_000
"""The longest trajectory read (docs/report-limits.md): a step, T or FED beyond it is an input
error. The per-depth lists of the report (PEC, PEC-eligible, trajectories at depth) hold one
value per depth up to the largest T, so this bounds their size: a hostile or garbled
``T = 10**12`` is a clear ``file:line`` error, not gigabytes of lists."""
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
# A summary span as kept per trajectory: (T, FED, cause, success, sorted label pairs).
_Summary = tuple[int, int, str | None, bool | None, tuple[tuple[str, str], ...]]
_SpanId = tuple[str, str]  # (trace id, span id)
# The first failing call's description (tool, check, message, arguments, result), read only
# from invalid call spans: a valid call costs nothing more.
_Detail = tuple[str | None, str | None, str | None, str | None, str | None]
_DETAIL_KEYS = (A.GEN_AI_TOOL_NAME, A.CHECK, A.MESSAGE)
_CONTENT_KEYS = (A.GEN_AI_TOOL_CALL_ARGUMENTS, A.GEN_AI_TOOL_CALL_RESULT)
_DETAIL_CUT = 1000  # a message or id longer than this is cut (the page stays small)


def _detail(d: dict[str, AnyValue]) -> _Detail:
    tool, check, message = (text(d.get(k), _DETAIL_CUT) for k in _DETAIL_KEYS)
    arguments, result = (text(d.get(k), CONTENT_CUT) for k in _CONTENT_KEYS)
    return (tool, check, message, arguments, result)


def _detail_key(detail: _Detail | None) -> tuple[str, ...]:
    return () if detail is None else tuple(x or "" for x in detail)


def _rank(cause: str | None) -> tuple[int, str]:
    """Orders the causes of failures at one step: precedence, then an unknown word, then no
    cause at all; unknown words among themselves alphabetically. Whatever the reading order,
    the same cause wins (the SQL report orders them the same way)."""
    if cause is None:
        return (len(_RANK) + 1, "")
    return (_RANK.get(cause, len(_RANK)), cause)


def _summary_key(s: _Summary) -> tuple[Any, ...]:
    """Orders two different summaries under one span id (a broken writer): the smaller is
    kept, whatever the reading order (the SQL report compares the same tuple)."""
    length, fed, cause, success, labels = s
    return (length, fed, cause is not None, cause or "", -1 if success is None else success, labels)


class _Traj:
    __slots__ = (
        "bad_cause",
        "bad_detail",
        "bad_step",
        "calls",
        "max_step",
        "problems",
        "summary",
        "summary_id",
        "summary_ids",
    )

    def __init__(self) -> None:
        self.max_step = 0
        self.bad_step = _NO_STEP
        self.bad_cause: str | None = None
        self.bad_detail: _Detail | None = None
        self.calls = 0  # call spans read (not de-duplicated: see docs/report-limits.md)
        self.summary: _Summary | None = None
        self.summary_id: _SpanId = ("", "")
        # Every distinct summary span id and its summary, kept only once a second one turns
        # up (appended runs).
        self.summary_ids: dict[_SpanId, _Summary] | None = None
        self.problems: set[str] | None = None  # disagreements found while reading

    def problem(self, text: str) -> None:
        if self.problems is None:
            self.problems = set()
        self.problems.add(text)


def _summary(
    tid: str, d: dict[str, AnyValue], span: dict[str, Any], max_length: int
) -> tuple[str, _Summary, _SpanId]:
    length = int_value(d[A.TRAJECTORY_LENGTH], A.TRAJECTORY_LENGTH)
    fed_v = d.get(A.TRAJECTORY_FED)
    if fed_v is None:
        raise Malformed(f"summary span of trajectory {short_id(tid)!r} lacks {A.TRAJECTORY_FED}")
    fed = int_value(fed_v, A.TRAJECTORY_FED)
    if length < 0:
        raise Malformed(f"{A.TRAJECTORY_LENGTH} must be >= 0, got {length}")
    if length > max_length:
        raise Malformed(too_long(A.TRAJECTORY_LENGTH, length, max_length, tid))
    if fed < 1:
        raise Malformed(f"{A.TRAJECTORY_FED} must be >= 1, got {fed}")
    if fed > max_length + 1:
        raise Malformed(too_long(A.TRAJECTORY_FED, fed, max_length, tid))
    cause_v = d.get(A.TRAJECTORY_FIRST_ERROR_CAUSE)
    cause = None if cause_v is None else str_value(cause_v, A.TRAJECTORY_FIRST_ERROR_CAUSE)
    success_v = d.get(A.TRAJECTORY_SUCCESS)
    success = None if success_v is None else bool_value(success_v, A.TRAJECTORY_SUCCESS)
    labels = tuple(
        sorted(
            (k[_LABEL_CUT:], str_value(v, k))
            for k, v in d.items()
            if k.__class__ is str and k.startswith(A.LABEL_PREFIX)
        )
    )
    ident = (str(span.get("traceId", "")), str(span.get("spanId", "")))
    return (tid, (length, fed, cause, success, labels), ident)


class BadSpan(NamedTuple):
    """A span left out of a line otherwise read (``Collector.feed(..., skip_spans=True)``):
    the span itself, its 1-based position in the line, and what was wrong with it."""

    span: object
    position: int
    why: str


def _why(exc: Exception) -> str:
    if isinstance(exc, Malformed):
        return str(exc)
    return f"not a well-formed trace export ({type(exc).__name__}: {short_id(str(exc))})"


class Collector:
    """Feed it export requests, then take the records.

    ``max_length`` bounds every step, T and FED read (see DEFAULT_MAX_LENGTH)."""

    def __init__(self, *, max_length: int = DEFAULT_MAX_LENGTH) -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {max_length}")
        self.trajs: dict[str, _Traj] = {}
        self.spans = 0
        self.max_length = max_length

    def feed(self, request: ExportRequest, *, skip_spans: bool = False) -> list[BadSpan]:
        """Fold one export request. Raises Malformed before changing anything when a span
        breaks the contract, so a refused line leaves no trace. With ``skip_spans`` a bad
        span is left out on its own instead (the line's other spans are folded) and
        returned; a request whose own structure is broken still raises."""
        # The hot loop: no object per span beyond one dict of its attributes and, for our
        # call spans, one small tuple; constants are locals. The common encodings (a string
        # id, an int as a decimal string or a number, a JSON boolean) take the fast path;
        # anything else goes through the checked readers above.
        tid_key, step_key, valid_key, cause_key, len_key = _TID, _STEP, _VALID, _CAUSE, _LEN
        max_length = self.max_length
        calls: list[tuple[str, int, bool, str | None, _Detail | None]] = []
        summaries: list[tuple[str, _Summary, _SpanId]] = []
        bad: list[BadSpan] = []
        spans_seen = 0
        try:
            for rs in request["resourceSpans"]:
                for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
                    spans = ss.get("spans") or ()
                    if spans.__class__ is not list and spans.__class__ is not tuple:
                        raise Malformed(f"a scope's spans is a {type(spans).__name__}, not a list")
                    for span in spans:
                        spans_seen += 1
                        # One span's fault is its own (a span is appended to ``calls`` or
                        # ``summaries`` only once fully read): with skip_spans it costs only
                        # itself, as in the SQL report, not the batch of spans it came with.
                        try:
                            attrs = span.get("attributes")
                            if not attrs:
                                continue
                            d: dict[str, AnyValue] = {a["key"]: a["value"] for a in attrs}
                            tv = d.get(tid_key)
                            if tv is None:
                                continue  # not ours, or a call made outside any trajectory
                            tid = tv.get("stringValue")
                            if tid.__class__ is not str or not tid:
                                tid = trajectory_id(tv)
                            if len_key in d:
                                summaries.append(_summary(tid, d, span, max_length))
                                continue
                            sv = d.get(step_key)
                            if sv is None:
                                continue  # some other span of ours: no figure depends on it
                            raw = sv.get("intValue")
                            try:
                                step = (
                                    int(raw)
                                    if raw.__class__ is str and raw.isascii() and raw.isdigit()
                                    else raw
                                )
                            except ValueError:  # thousands of digits: refused by int() itself
                                step = None
                            if step.__class__ is not int or not 1 <= step <= max_length:
                                step = step_value(sv, tid, max_length)
                            vv = d.get(valid_key)
                            if vv is None:
                                raise Malformed(
                                    f"call span of trajectory {short_id(tid)!r} step {step} "
                                    f"lacks {valid_key}"
                                )
                            valid = vv.get("boolValue")
                            if valid is not True and valid is not False:
                                valid = bool_value(vv, valid_key)
                            if valid:
                                calls.append((tid, step, True, None, None))
                                continue
                            cv = d.get(cause_key)
                            cause = None if cv is None else str_value(cv, cause_key)
                            calls.append((tid, step, False, cause, _detail(d)))
                        except (Malformed, AttributeError, KeyError, TypeError) as exc:
                            why = _why(exc)
                            if not skip_spans:
                                raise Malformed(why) from None
                            bad.append(BadSpan(span, spans_seen, why))
        except (AttributeError, KeyError, TypeError) as exc:
            raise Malformed(_why(exc)) from None
        self.spans += spans_seen
        for tid, step, valid, cause, detail in calls:
            self._call(tid, step, valid, cause, detail)
        for tid, summary, ident in summaries:
            self._summary(tid, summary, ident)
        return bad

    def _traj(self, tid: str) -> _Traj:
        t = self.trajs.get(tid)
        if t is None:
            t = self.trajs[tid] = _Traj()
        return t

    def _call(
        self, tid: str, step: int, valid: bool, cause: str | None, detail: _Detail | None = None
    ) -> None:
        t = self.trajs.get(tid) or self._traj(tid)
        t.calls += 1
        if step > t.max_step:
            t.max_step = step
        if valid or step > t.bad_step:
            return
        if step < t.bad_step or _rank(cause) < _rank(t.bad_cause):
            # Ties (one step, two causes) resolve by precedence: independent of order.
            t.bad_step, t.bad_cause, t.bad_detail = step, cause, detail
        elif cause == t.bad_cause and _detail_key(detail) < _detail_key(t.bad_detail):
            t.bad_detail = detail  # two descriptions of one failure: the same one kept

    def _summary(self, tid: str, summary: _Summary, ident: _SpanId) -> None:
        t = self._traj(tid)
        if t.summary is None:
            t.summary, t.summary_id = summary, ident
            return
        if t.summary_ids is None:
            if ident == t.summary_id:
                if summary != t.summary:
                    t.problem(TWO_SUMMARIES)
                    if _summary_key(summary) < _summary_key(t.summary):
                        t.summary = summary
                return
            # Another summary span for the same trajectory id: usually a second run appended
            # to the same file. Ids are kept from now on, so that duplicates of either are not
            # counted twice.
            t.summary_ids = {t.summary_id: t.summary}
        known = t.summary_ids.get(ident)
        if known is None:
            t.summary_ids[ident] = summary
            t.problem(MORE_THAN_ONE_SUMMARY)
        elif known != summary:
            t.problem(TWO_SUMMARIES)
            if _summary_key(summary) < _summary_key(known):
                t.summary_ids[ident] = summary
        # Keep the same one whatever the reading order: the smallest (trace id, span id).
        if ident <= t.summary_id:
            t.summary, t.summary_id = t.summary_ids[ident], ident

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
            tid,
            length,
            fed,
            t.bad_cause if bad else None,
            None,
            {},
            True,
            tuple(sorted(problems)),
            call_spans=t.calls,
            summary_spans=0,
            first_error=_first_error(t) if bad else None,
        )
    length, fed, cause, success, labels = t.summary
    if not 1 <= fed <= length + 1:
        problems.add(f"{FED_OUT_OF_RANGE}: FED {fed} with T {length}")
        fed = min(max(fed, 1), length + 1)
    if t.max_step > length:
        problems.add(f"{STEP_BEYOND}: step {t.max_step} > T {length}")
    if bad is not None and bad < fed:
        problems.add(f"{BAD_BEFORE}: step {bad} < FED {fed}")
    elif bad == fed and t.bad_cause is not None:
        if cause is None:
            cause = t.bad_cause  # the summary omitted it; the call span still knows
        elif cause != t.bad_cause:
            problems.add(f"{CAUSE_DIFFERS}: {cause} vs {t.bad_cause}")
    if fed > length:
        cause = None
    return TrajectoryRecord(
        tid,
        length,
        fed,
        cause,
        success,
        dict(labels),
        False,
        tuple(sorted(problems)),
        call_spans=t.calls,
        summary_spans=1 if t.summary_ids is None else len(t.summary_ids),
        # The call span's description belongs to its step: shown only where it is the FED.
        first_error=_first_error(t) if bad is not None and bad == fed <= length else None,
    )


def _first_error(t: _Traj) -> FirstError | None:
    return None if t.bad_detail is None else FirstError(*t.bad_detail)
