"""Span-file builders shared by the report's reliability tests (test_report_*.py), and a check
that what they build reads back as intended.

Unlike tests/report/spanfiles.py, these builders take any AnyValue as is, so a test can put a
hostile value anywhere: ``raw(key, {"intValue": 10**30})``."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from toolguard import _contract as A
from toolguard.report.read import read_records

_ids = itertools.count(1)
TRACE = "0" * 31 + "1"


def value(v: Any) -> dict[str, Any]:
    """The AnyValue of a Python value, the way OTLP JSON writes it (ints as decimal strings)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    return {"stringValue": v}


def raw(key: str, any_value: Any) -> dict[str, Any]:
    return {"key": key, "value": any_value}


def kv(key: str, v: Any) -> dict[str, Any]:
    return raw(key, value(v))


def span(attrs: Iterable[dict[str, Any]], *, trace: str = TRACE, span_id: str | None = None):
    return {
        "traceId": trace,
        "spanId": span_id or f"{next(_ids):016x}",
        "name": "span",
        "attributes": list(attrs),
    }


def call(
    tid: str, step: int, valid: bool = True, cause: str | None = None, **kw: Any
) -> dict[str, Any]:
    attrs = [kv(A.TRAJECTORY_ID, tid), kv(A.STEP, step), kv(A.VALID, valid)]
    if cause is not None:
        attrs.append(kv(A.CAUSE, cause))
    return span(attrs, **kw)


def summary(
    tid: str,
    length: int,
    fed: int,
    cause: str | None = None,
    success: bool | None = None,
    labels: Mapping[str, str] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    attrs = [kv(A.TRAJECTORY_ID, tid), kv(A.TRAJECTORY_LENGTH, length), kv(A.TRAJECTORY_FED, fed)]
    if cause is not None:
        attrs.append(kv(A.TRAJECTORY_FIRST_ERROR_CAUSE, cause))
    if success is not None:
        attrs.append(kv(A.TRAJECTORY_SUCCESS, success))
    attrs += [kv(A.LABEL_PREFIX + k, v) for k, v in (labels or {}).items()]
    return span(attrs, **kw)


def trajectory(
    tid: str,
    length: int,
    fed: int | None = None,
    success: bool | None = True,
    labels: Mapping[str, str] | None = None,
    **kw: Any,
) -> list[dict[str, Any]]:
    """Call spans 1..T and the summary; every call valid except the one at ``fed``."""
    fed = length + 1 if fed is None else fed
    calls = [
        call(tid, s, s != fed, "schema" if s == fed else None, **kw) for s in range(1, length + 1)
    ]
    cause = "schema" if fed <= length else None
    return [*calls, summary(tid, length, fed, cause, success, labels, **kw)]


def export(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


def write(path: Path, lines: Iterable[dict[str, Any] | str], mode: str = "w") -> Path:
    with path.open(mode, encoding="utf-8") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return path


def test_the_builders_read_back(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [export(*trajectory("a", 3, 2, labels={"m": "x"}))])
    (r,), stats = read_records([str(path)])
    assert (r.trajectory_id, r.length, r.fed, r.first_error_cause, r.success) == (
        "a",
        3,
        2,
        "schema",
        True,
    )
    assert r.labels == {"m": "x"} and r.call_spans == 3 and r.summary_spans == 1
    assert not r.disagreements and stats.spans == 4
