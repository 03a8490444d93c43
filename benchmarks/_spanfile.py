"""Span files shaped like the embedded exporter's: one ExportTraceServiceRequest per line,
SDK resource and scope, the guard's call and summary spans, trajectories interleaved. By
default a few spans per line (what a BatchSpanProcessor flushes from a quiet agent service
every 200 ms); ``per_line=2048`` writes the batches of a busy one, up to 2,048 spans a line as
the official file exporter writes them (each line half to fully full)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from toolguard import __version__
from toolguard import _contract as A

_RESOURCE = {
    "attributes": [
        {"key": "telemetry.sdk.language", "value": {"stringValue": "python"}},
        {"key": "telemetry.sdk.name", "value": {"stringValue": "opentelemetry"}},
        {"key": "telemetry.sdk.version", "value": {"stringValue": "1.45.2"}},
        {"key": "service.name", "value": {"stringValue": "agent-bench"}},
    ]
}
# The scope the guard writes (toolguard/runtime/telemetry/spans.py), its version the installed one.
_SCOPE = {"name": "toolguard", "version": __version__}
_TOOLS = ("search_contact", "remove_contact", "send_message", "get_weather", "book_flight")


def _s(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _i(key: str, value: int) -> dict[str, Any]:
    return {"key": key, "value": {"intValue": str(value)}}


def _b(key: str, value: bool) -> dict[str, Any]:
    return {"key": key, "value": {"boolValue": value}}


def _trajectory(t: int, calls: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    tid = f"traj-{t:07d}"
    trace_id = f"{rng.getrandbits(128):032x}"
    root = f"{rng.getrandbits(64):016x}"
    fed = calls + 1 if rng.random() < 0.4 else rng.randint(1, calls)
    first_cause = rng.choice(A.CAUSES)
    clock = 1_796_000_000_000_000_000 + t * 1_000_000_000
    for step in range(1, calls + 1):
        tool = rng.choice(_TOOLS)
        valid = step < fed or (step > fed and rng.random() < 0.7)
        attrs = [
            _s(A.GEN_AI_OPERATION_NAME, A.OPERATION_EXECUTE_TOOL),
            _s(A.GEN_AI_TOOL_NAME, tool),
            _s(A.GEN_AI_TOOL_TYPE, "function"),
            _s(A.GEN_AI_TOOL_CALL_ID, f"call_{rng.getrandbits(48):012x}"),
            _s(A.TRAJECTORY_ID, tid),
            _i(A.STEP, step),
            _b(A.VALID, valid),
        ]
        status: dict[str, Any] = {}
        if valid:
            attrs.append(_s(A.DECISION, A.ALLOWED))
        else:
            cause = first_cause if step == fed else rng.choice(A.CAUSES)
            message = f"{tool}: the {cause} check failed for this call"
            attrs += [
                _s(A.DECISION, A.BLOCKED),
                _s(A.CAUSE, cause),
                _s(A.CHECK, f"{cause}.arg"),
                _s(A.MESSAGE, message),
                {
                    "key": A.FAILED_CHECKS,
                    "value": {"arrayValue": {"values": [{"stringValue": f"{cause}.arg"}]}},
                },
                _s(A.ERROR_TYPE, A.error_type(cause)),
            ]
            status = {"message": message, "code": 2}
        clock += 1_000_000
        yield _span(
            trace_id,
            f"{rng.getrandbits(64):016x}",
            root,
            f"execute_tool {tool}",
            clock,
            attrs,
            status,
        )
    summary = [
        _s(A.TRAJECTORY_ID, tid),
        _i(A.TRAJECTORY_LENGTH, calls),
        _i(A.TRAJECTORY_FED, fed),
        _s(A.LABEL_PREFIX + "model", f"model-{t % 3}"),
        _s(A.LABEL_PREFIX + "method", ("react", "plan")[t % 2]),
    ]
    if fed <= calls:
        summary.append(_s(A.TRAJECTORY_FIRST_ERROR_CAUSE, first_cause))
    if t % 5:
        summary.append(_b(A.TRAJECTORY_SUCCESS, rng.random() < 0.7))
    yield _span(trace_id, root, None, A.SUMMARY_SPAN_NAME, clock + 1_000, summary, {})


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    end: int,
    attrs: list[dict[str, Any]],
    status: dict[str, Any],
) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    if parent:
        span["parentSpanId"] = parent
    span.update(
        flags=256,
        name=name,
        kind=1,
        startTimeUnixNano=str(end - 90_000),
        endTimeUnixNano=str(end),
        attributes=attrs,
        status=status,
    )
    return span


def generate(
    path: Path,
    trajectories: int,
    calls: int,
    *,
    seed: int = 1,
    concurrent: int = 16,
    per_line: int | None = None,
) -> dict[str, int]:
    """Write ``trajectories`` x ``calls`` call spans plus one summary each; returns counts.
    ``per_line``: the largest batch a line holds (None: 1 to 8 spans a line)."""
    rng = random.Random(seed)
    pending = iter(range(trajectories))
    active = [_trajectory(t, calls, rng) for t in _take(pending, concurrent)]
    lines = spans = 0
    with path.open("wb") as f:
        while active:
            batch = []
            size = rng.randint(1, 8) if per_line is None else rng.randint(per_line // 2, per_line)
            for _ in range(size):
                if not active:
                    break
                i = rng.randrange(len(active))
                span = next(active[i], None)
                if span is None:
                    nxt = next(pending, None)
                    if nxt is None:
                        active.pop(i)
                    else:
                        active[i] = _trajectory(nxt, calls, rng)
                    continue
                batch.append(span)
            if batch:
                request = {
                    "resourceSpans": [
                        {"resource": _RESOURCE, "scopeSpans": [{"scope": _SCOPE, "spans": batch}]}
                    ]
                }
                f.write(orjson.dumps(request) + b"\n")
                lines += 1
                spans += len(batch)
    return {"lines": lines, "spans": spans, "bytes": path.stat().st_size}


def _take(it: Iterator[int], n: int) -> list[int]:
    return [x for _, x in zip(range(n), it, strict=False)]
