"""The trajectories already in a span file a replay appends to, so an append that would merge
two recorded runs into one trajectory is refused before anything is written.

Reads the OTLP JSON Lines the replay writes (one ``ExportTraceServiceRequest`` a line): the
``toolguard.trajectory.id`` of every span, and the ``toolguard.label.*`` attributes of the
summary spans (those with ``toolguard.trajectory.length``). Nothing is evaluated; a line that
is not such JSON is passed over (the report, not the replay, judges the file).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

_ID = "toolguard.trajectory.id"
_LENGTH = "toolguard.trajectory.length"
_LABEL = "toolguard.label."


def trajectories(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """Trajectory id -> its labels (empty when the file holds no summary span for it)."""
    out: dict[str, dict[str, str]] = {}
    if not os.path.isfile(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                request = json.loads(line)
            except (ValueError, RecursionError):
                continue
            for attributes in _spans(request):
                tid = attributes.get(_ID)
                if not isinstance(tid, str):
                    continue
                labels = out.setdefault(tid, {})
                if _LENGTH in attributes:
                    for key, value in attributes.items():
                        if key.startswith(_LABEL):
                            labels[key.removeprefix(_LABEL)] = str(value)
    return out


def _spans(request: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(request, Mapping):
        return
    for resource in _list(request.get("resourceSpans")):
        for scope in _list(resource.get("scopeSpans") if isinstance(resource, Mapping) else None):
            for span in _list(scope.get("spans") if isinstance(scope, Mapping) else None):
                if isinstance(span, Mapping):
                    yield {
                        str(a.get("key")): _value(a.get("value"))
                        for a in _list(span.get("attributes"))
                        if isinstance(a, Mapping)
                    }


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _value(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return None
    for key in ("stringValue", "intValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    return None
