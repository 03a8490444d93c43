"""Builders of OTLP JSON export lines, written the way the OTLP JSON file exporters write them.

A module of its own (not conftest.py) so that `from spanfiles import ...` cannot pick up the
conftest.py of another test directory."""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from toolguard import _contract as A

_ids = itertools.count(1)


def attr(key: str, value: Any, *, int_as_number: bool = False) -> dict[str, Any]:
    """One OTLP KeyValue; ints as decimal strings (the proto JSON mapping) unless asked not."""
    if isinstance(value, bool):
        v: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": value if int_as_number else str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    elif isinstance(value, list):
        v = {"arrayValue": {"values": [{"stringValue": x} for x in value]}}
    else:
        v = {"stringValue": value}
    return {"key": key, "value": v}


def span(
    attrs: Mapping[str, Any],
    *,
    trace: str = "0" * 31 + "1",
    span_id: str | None = None,
    name: str = "span",
    int_as_number: bool = False,
) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": span_id or f"{next(_ids):016x}",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": [attr(k, v, int_as_number=int_as_number) for k, v in attrs.items()],
        "status": {},
    }


def call(
    tid: str | None, step: int, valid: bool = True, cause: str | None = None, **kw: Any
) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        A.GEN_AI_OPERATION_NAME: A.OPERATION_EXECUTE_TOOL,
        A.GEN_AI_TOOL_NAME: "tool",
        A.STEP: step,
        A.VALID: valid,
        A.DECISION: A.ALLOWED if valid else A.BLOCKED,
    }
    if tid is not None:
        attrs[A.TRAJECTORY_ID] = tid
    if not valid and cause:
        attrs[A.CAUSE] = cause
        attrs[A.ERROR_TYPE] = A.error_type(cause)
    return span(attrs, name=A.call_span_name("tool"), **kw)


def summary(
    tid: str,
    length: int,
    fed: int,
    cause: str | None = None,
    success: bool | None = None,
    labels: Mapping[str, str] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        A.TRAJECTORY_ID: tid,
        A.TRAJECTORY_LENGTH: length,
        A.TRAJECTORY_FED: fed,
    }
    if cause is not None:
        attrs[A.TRAJECTORY_FIRST_ERROR_CAUSE] = cause
    if success is not None:
        attrs[A.TRAJECTORY_SUCCESS] = success
    for k, v in (labels or {}).items():
        attrs[A.LABEL_PREFIX + k] = v
    return span(attrs, name=A.SUMMARY_SPAN_NAME, **kw)


def export(*spans: dict[str, Any]) -> dict[str, Any]:
    """One ExportTraceServiceRequest line holding ``spans``."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr("service.name", "test")]},
                "scopeSpans": [{"scope": {"name": "toolguard"}, "spans": list(spans)}],
            }
        ]
    }


def trajectory(
    tid: str,
    validity: Iterable[bool | str],
    success: bool | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Call spans and the summary of one trajectory; an item of ``validity`` is True (valid)
    or the cause of an invalid call."""
    vs = list(validity)
    spans = [
        call(tid, i, True) if v is True else call(tid, i, False, str(v))
        for i, v in enumerate(vs, 1)
    ]
    bad = [i for i, v in enumerate(vs, 1) if v is not True]
    fed = bad[0] if bad else len(vs) + 1
    cause = str(vs[fed - 1]) if bad else None
    return [*spans, summary(tid, len(vs), fed, cause, success, labels)]


Writer = Callable[..., Path]


@pytest.fixture
def write_lines(tmp_path: Path) -> Writer:
    """write_lines(lines, name="spans.jsonl"): dicts are dumped as JSON, strings kept as is;
    a name ending in .gz is gzip-compressed."""

    def write(lines: Iterable[dict[str, Any] | str], name: str = "spans.jsonl") -> Path:
        text = "".join(
            (line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines
        )
        path = tmp_path / name
        if name.endswith(".gz"):
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    return write
