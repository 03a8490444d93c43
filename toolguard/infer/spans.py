"""Recorded runs out of a span file written with ``record_content=True`` (``--format spans``,
and ``--format mcp`` for the recording of ``toolguard mcp-proxy --record FILE``, which is
such a file).

The file is OTLP JSON Lines (docs/protocol.md, section 4), read with replay's bounded JSON
reader, one line at a time. A call span (one with ``toolguard.trajectory.id`` and
``toolguard.step``) is one call; a trajectory is its call spans ordered by step, a span seen
twice (same trace and span id) once. The call's arguments and result are its
``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` (JSON text, parsed as data,
never evaluated). The environment accepted the call when it ran (decision ``allowed`` or
``logged``) without a ``state_consistency`` failure (an exception, an error result, a
postcondition) and with its status unset; a blocked or cancelled call never reached the
environment and has no answer.

What a span file does not hold: the user's messages (so no ``grounded`` evidence) and the
tools' schemas (an MCP server's ``tools/list`` is not in its spans). Content is cut at 4,096
characters when recorded: a cut argument text is not read (the call counts as unread), a cut
result is text. A file without recorded content says so: it needs ``record_content=True``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._contract import (
    BLOCKED,
    CANCELLED,
    CAUSE,
    DECISION,
    FAILED_CHECKS,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    LABEL_PREFIX,
    STATE_CONSISTENCY,
    STEP,
    TRAJECTORY_ID,
    TRAJECTORY_LENGTH,
    TRAJECTORY_SUCCESS,
)
from ..replay.jsonstream import DEFAULT_MAX_ELEMENT_BYTES, DEFAULT_MAX_STRING_BYTES, iter_values
from ..replay.model import (
    Answer,
    RecordedCall,
    RecordedRun,
    ReplayInputError,
    Turn,
    format_hint,
    json_lines_hint,
)

SPAN_FORMATS = ("spans", "mcp")
_CUT = "…"  # what the guard appends to content it cut (telemetry/spans.py's content)
_ERROR_STATUS = (2, "STATUS_CODE_ERROR")


@dataclass(slots=True)
class _Call:
    step: int
    call: RecordedCall
    content: bool
    cut: bool = False  # its arguments or result were cut at the recording limit


@dataclass
class SpanRead:
    """What reading span files found besides the runs: warnings naming the file."""

    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Unread:
    """Spans of one kind of damage, not read: how many, and where the first one was."""

    why: str
    count: int = 0
    first: str = ""

    def add(self, where: str) -> None:
        self.count += 1
        if not self.first:
            self.first = where

    def warning(self, name: str) -> str | None:
        if not self.count:
            return None
        return f"{name}: {self.count} {self.why}, not read (the first at {self.first})"


def span_runs(
    path: str | os.PathLike[str],
    read: SpanRead | None = None,
    *,
    max_element_bytes: int = DEFAULT_MAX_ELEMENT_BYTES,
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES,
) -> Iterator[RecordedRun]:
    """The trajectories of one span file, sorted by id. A line that is not JSON, or longer
    than ``max_element_bytes``, raises :class:`ReplayInputError` naming the file and line;
    content missing or cut is a warning in ``read``."""
    name = os.fspath(path)
    read = read if read is not None else SpanRead()
    calls: dict[str, list[_Call]] = {}
    summaries: dict[str, dict[str, Any]] = {}
    # (trace id, span id) -> a digest of what the span said: a span exported twice is read
    # once; one id holding two different spans (a broken writer) is said.
    seen: dict[tuple[str, str], int] = {}
    # A call span the reader cannot place is evidence lost: said, never dropped in silence
    # (a file of them would otherwise read as "no recorded run").
    bad_step = _Unread(f"call span(s) whose {STEP} is not a whole number >= 1")
    no_tid = _Unread(f"call span(s) with {STEP} but no {TRAJECTORY_ID} string")
    reused = _Unread("span(s) under the trace and span id of an earlier, different span")
    values = iter_values(
        name,
        json_lines=True,
        max_element_bytes=max_element_bytes,
        max_string_bytes=max_string_bytes,
    )
    for located in values:
        if located.error is not None:
            hint = json_lines_hint(name) if located.top == 0 else ""
            raise ReplayInputError(f"{located.where}: {located.error}{hint}")
        if not isinstance(located.value, Mapping) or "resourceSpans" not in located.value:
            raise ReplayInputError(
                f"{located.where}: not an OTLP trace export (resourceSpans)"
                f"{format_hint(located.value, 'spans')}"
            )
        for ident, attributes, status in _spans(located.value):
            if ident is not None:
                digest = hash(repr((sorted(attributes.items()), status)))
                if ident in seen:
                    if seen[ident] != digest:
                        reused.add(f"{located.where}, span id {ident[1]!r}")
                    continue
                seen[ident] = digest
            tid = attributes.get(TRAJECTORY_ID)
            if not isinstance(tid, str) or not tid:
                if STEP in attributes and TRAJECTORY_LENGTH not in attributes:
                    no_tid.add(located.where)
                continue
            if TRAJECTORY_LENGTH in attributes:
                summaries[tid] = attributes
            elif STEP in attributes:
                step = _int(attributes.get(STEP))
                if step is None or step < 1:
                    bad_step.add(f"{located.where}, trajectory {tid!r}")
                    continue
                calls.setdefault(tid, []).append(_call(step, attributes, status))
    unread = (bad_step, no_tid, reused)
    read.warnings += [w for u in unread if (w := u.warning(name)) is not None]
    empty = sorted(
        t for t, s in summaries.items() if t not in calls and _int(s.get(TRAJECTORY_LENGTH))
    )
    if empty:
        read.warnings.append(
            f"{name}: {len(empty)} trajector(y/ies) with a summary span of calls but no call "
            f"span (the first: {empty[0]!r}): lost calls, nothing to read"
        )
    total = sum(len(c) for c in calls.values())
    bare = sum(1 for c in calls.values() for one in c if not one.content)
    if total and bare == total:
        read.warnings.append(
            f"{name}: no call span holds recorded arguments or results: the span file must be "
            "written with record_content=True (tg.Guard(record_content=True), or "
            "`toolguard mcp-proxy --record`); nothing can be inferred from it"
        )
    elif bare:
        read.warnings.append(
            f"{name}: {bare} of {total} call spans hold no recorded arguments "
            "(written without record_content=True): they count as calls with no result"
        )
    cut = sum(1 for c in calls.values() for one in c if one.cut)
    if cut:
        read.warnings.append(
            f"{name}: {cut} call span(s) hold arguments or a result cut at the recording "
            "limit (4,096 characters): cut arguments are not read, a cut result is text"
        )
    for tid in sorted(calls):
        ordered = sorted(calls[tid], key=lambda c: c.step)
        summary = summaries.get(tid, {})
        success = summary.get(TRAJECTORY_SUCCESS)
        labels = {
            k.removeprefix(LABEL_PREFIX): str(v)
            for k, v in sorted(summary.items())
            if k.startswith(LABEL_PREFIX)
        }
        yield RecordedRun(
            tid,
            [Turn([c.call]) for c in ordered],
            f"{name} (trajectory {tid})",
            success=success if isinstance(success, bool) else None,
            task=labels.get("task"),
            labels=labels,
        )


def _call(step: int, attributes: Mapping[str, Any], status: Any) -> _Call:
    tool = str(attributes.get(GEN_AI_TOOL_NAME, ""))
    call_id = attributes.get(GEN_AI_TOOL_CALL_ID)
    raw_arguments = attributes.get(GEN_AI_TOOL_CALL_ARGUMENTS)
    content = isinstance(raw_arguments, str)
    # Text that is not JSON (cut, or a repr) is kept as text: the flow reads it as unread.
    arguments = _json(raw_arguments) if content else None
    call = RecordedCall(tool, arguments, call_id if isinstance(call_id, str) else None)
    raw_result = attributes.get(GEN_AI_TOOL_CALL_RESULT)
    cut = any(isinstance(t, str) and t.endswith(_CUT) for t in (raw_arguments, raw_result))
    decision = attributes.get(DECISION)
    if not content or decision in (BLOCKED, CANCELLED):
        return _Call(step, call, content, cut)  # never reached the environment, or unknown
    failed = attributes.get(FAILED_CHECKS)
    checks = failed if isinstance(failed, list) else []
    rejected = (
        attributes.get(CAUSE) == STATE_CONSISTENCY
        or any(isinstance(c, str) and c.startswith(STATE_CONSISTENCY) for c in checks)
        or status in _ERROR_STATUS
    )
    result = _json(raw_result) if isinstance(raw_result, str) else None
    call.answer = Answer(result, rejected)
    return _Call(step, call, content, cut)


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    if text.endswith(_CUT):
        return text  # cut at the recording limit: not JSON any more
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than the parser's stack: text too
        return text


def _spans(
    request: Mapping[str, Any],
) -> Iterator[tuple[tuple[str, str] | None, dict[str, Any], Any]]:
    for resource in _list(request.get("resourceSpans")):
        scopes = resource.get("scopeSpans") if isinstance(resource, Mapping) else None
        for scope in _list(scopes):
            for span in _list(scope.get("spans") if isinstance(scope, Mapping) else None):
                if not isinstance(span, Mapping):
                    continue
                trace_id, span_id = span.get("traceId"), span.get("spanId")
                ident = (
                    (trace_id, span_id)
                    if isinstance(trace_id, str) and isinstance(span_id, str)
                    else None
                )
                attributes = {
                    str(a.get("key")): _value(a.get("value"))
                    for a in _list(span.get("attributes"))
                    if isinstance(a, Mapping)
                }
                status = span.get("status")
                code = status.get("code") if isinstance(status, Mapping) else None
                yield ident, attributes, code


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _value(value: Any) -> Any:
    """An OTLP JSON attribute value as data (64-bit integers may be decimal strings)."""
    if not isinstance(value, Mapping):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return _int(value["intValue"])
    array = value.get("arrayValue")
    if isinstance(array, Mapping):
        return [_value(v) for v in _list(array.get("values"))]
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None
