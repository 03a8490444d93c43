"""Fold spans into one record per trajectory (the reading rules of PROTOCOL.md section 4).

State is O(1) per trajectory whatever the number of spans: the largest step seen, the smallest
invalid step and its cause, the summary span. Every update is a min, a max or a deterministic
choice between summaries, so a span read twice (the same trace and span id, e.g. two exports
of one batch) cannot change any figure, and no set of span ids has to be kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from . import _attributes as A
from ._metrics import TrajectoryRecord
from ._otlp_reader import ReadStats, ReportInputError, iter_exports

_NO_STEP = 1 << 62  # "no invalid step seen": larger than any real step, so min() needs no None
_RANK = {c: i for i, c in enumerate(A.CAUSES)}
_LABEL_CUT = len(A.LABEL_PREFIX)


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
        self.summary: tuple[Any, ...] | None = None  # (T, FED, cause, success, labels)
        self.summary_id: tuple[str, str] = ("", "")
        self.problems: set[str] | None = None  # disagreements found while reading

    def problem(self, text: str) -> None:
        if self.problems is None:
            self.problems = set()
        self.problems.add(text)


def _int(value: Any, key: str) -> int:
    # OTLP JSON writes 64-bit integers as decimal strings; some writers use plain numbers.
    raw = value.get("intValue")
    try:
        if raw is None or isinstance(raw, bool):
            raise ValueError
        return int(raw)
    except (TypeError, ValueError):
        raise _Malformed(f"{key} is not an integer: {value!r}") from None


def _bool(value: Any, key: str) -> bool:
    raw = value.get("boolValue")
    if not isinstance(raw, bool):
        raise _Malformed(f"{key} is not a boolean: {value!r}")
    return raw


def _str(value: Any) -> str | None:
    raw = value.get("stringValue")
    if raw is None:
        for other in ("intValue", "doubleValue", "boolValue"):
            if other in value:
                return str(value[other])
    return raw


class Collector:
    """Feed it export requests, then take the records."""

    def __init__(self) -> None:
        self.trajs: dict[str, _Traj] = {}
        self.spans = 0
        self.ours = 0

    def feed(self, request: dict[str, Any]) -> None:
        """Fold one export request. Raises _Malformed before changing anything when a span
        breaks the contract, so a skipped line leaves no trace."""
        for item in list(self._scan(request)):
            self._apply(item)

    def _scan(self, request: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        try:
            for rs in request["resourceSpans"]:
                scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ()
                for ss in scopes:
                    spans = ss.get("spans") or ()
                    self.spans += len(spans)
                    for span in spans:
                        attrs = span.get("attributes")
                        if not attrs:
                            continue
                        d = {a["key"]: a.get("value") or {} for a in attrs}
                        tv = d.get(A.TRAJECTORY_ID)
                        if tv is None:
                            continue  # not ours, or a call made outside any trajectory
                        tid = _str(tv)
                        if not tid:
                            raise _Malformed(f"{A.TRAJECTORY_ID} is empty or not a string")
                        if A.TRAJECTORY_LENGTH in d:
                            yield self._summary(tid, d, span)
                        elif A.STEP in d:
                            yield self._call(tid, d)
        except (AttributeError, KeyError, TypeError) as exc:
            raise _Malformed(
                f"not a well-formed trace export ({type(exc).__name__}: {exc})"
            ) from None

    @staticmethod
    def _call(tid: str, d: dict[str, Any]) -> tuple[Any, ...]:
        step = _int(d[A.STEP], A.STEP)
        if step < 1:
            raise _Malformed(f"{A.STEP} must be >= 1, got {step}")
        valid_v = d.get(A.VALID)
        if valid_v is None:
            raise _Malformed(f"call span of trajectory {tid!r} step {step} lacks {A.VALID}")
        valid = _bool(valid_v, A.VALID)
        cause = None if valid else _str(d.get(A.CAUSE) or {})
        return (0, tid, step, valid, cause)

    @staticmethod
    def _summary(tid: str, d: dict[str, Any], span: dict[str, Any]) -> tuple[Any, ...]:
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
                (k[_LABEL_CUT:], _str(v) or "")
                for k, v in d.items()
                if k.startswith(A.LABEL_PREFIX)
            )
        )
        ident = (str(span.get("traceId", "")), str(span.get("spanId", "")))
        cause = _str(cause_v) if cause_v is not None else None
        return (1, tid, (length, fed, cause, success, labels), ident)

    def _apply(self, item: tuple[Any, ...]) -> None:
        tid = item[1]
        t = self.trajs.get(tid)
        if t is None:
            t = self.trajs[tid] = _Traj()
        self.ours += 1
        if item[0] == 0:
            _, _, step, valid, cause = item
            if step > t.max_step:
                t.max_step = step
            if not valid and (
                step < t.bad_step or (step == t.bad_step and _rank(cause) < _rank(t.bad_cause))
            ):
                # Ties (one step, two causes) resolve by precedence: independent of order.
                t.bad_step, t.bad_cause = step, cause
            return
        _, _, summary, ident = item
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
    for request, where in iter_exports(
        patterns, stats, skip_invalid=skip_invalid, progress=progress
    ):
        try:
            col.feed(request)
        except _Malformed as exc:
            if not skip_invalid:
                raise ReportInputError(f"{where}: {exc}") from None
            stats.skip(where, str(exc))
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
