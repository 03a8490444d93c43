"""Outcomes joined after the fact: trajectory id -> success, overriding the spans' Y.

JSON Lines (``{"trajectory_id": "...", "success": true}``) or CSV with columns
``trajectory_id`` and ``success``. ``null`` (JSON) or an empty cell (CSV) marks the outcome as
explicitly unknown, which also overrides.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Iterable

from .escape import short
from .metrics import TrajectoryRecord
from .reader import ReportInputError

_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


def _parse_bool(raw: object, where: str) -> bool | None:
    if raw is None or isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str):
        low = raw.strip().lower()
        if low == "" or low == "null":
            return None
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise ReportInputError(f"{where}: success must be true, false or null, got {raw!r}")


def load_outcomes(path: str) -> dict[str, bool | None]:
    """Read an outcomes file; the format is chosen by the first non-blank character."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except OSError as exc:
        raise ReportInputError(f"{path}: cannot open outcomes: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ReportInputError(
            f"{path}: outcomes are not UTF-8 text (byte {exc.start}); "
            "write them as CSV or JSON lines in UTF-8"
        ) from None
    if text.lstrip().startswith("{"):
        return _from_jsonl(text, path)
    try:
        return _from_csv(text, path)
    except csv.Error as exc:  # in the header: a field past the csv module's limit
        raise ReportInputError(f"{path}:1: not a CSV header: {exc}") from None


def _from_jsonl(text: str, path: str) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested past the stack
            raise ReportInputError(f"{where}: not valid JSON ({exc})") from None
        if not isinstance(obj, dict) or "trajectory_id" not in obj or "success" not in obj:
            raise ReportInputError(f"{where}: need an object with trajectory_id and success")
        tid = obj["trajectory_id"]
        if isinstance(tid, int) and not isinstance(tid, bool):
            tid = str(tid)  # an id a table tool wrote as a number
        if not isinstance(tid, str) or not tid:
            # str() of a list, a float or null would name no trajectory, silently.
            raise ReportInputError(
                f"{where}: trajectory_id must be a non-empty string, got {short(tid)}"
            )
        _put(out, tid, _parse_bool(obj["success"], where), where)
    return out


def _put(out: dict[str, bool | None], tid: str, success: bool | None, where: str) -> None:
    if tid in out and out[tid] != success:
        raise ReportInputError(
            f"{where}: trajectory {short(tid)} is listed again with another outcome "
            f"({out[tid]} before, {success} here)"
        )
    out[tid] = success


def _from_csv(text: str, path: str) -> dict[str, bool | None]:
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip() for f in reader.fieldnames or ()]
    if "trajectory_id" not in fields or "success" not in fields:
        raise ReportInputError(
            f"{path}:1: outcomes CSV needs a header with trajectory_id and success "
            f"(got {', '.join(fields) or 'nothing'})"
        )
    reader.fieldnames = fields
    out: dict[str, bool | None] = {}
    try:
        for row in reader:
            where = f"{path}:{reader.line_num}"
            tid = (row.get("trajectory_id") or "").strip()
            if not tid:
                raise ReportInputError(f"{where}: empty trajectory_id")
            _put(out, tid, _parse_bool(row.get("success"), where), where)
    except csv.Error as exc:  # a field past the csv module's limit, a quote never closed
        raise ReportInputError(
            f"{path}: not a CSV row after line {reader.line_num}: {exc}"
        ) from None
    return out


def join_outcomes(
    records: Iterable[TrajectoryRecord], outcomes: dict[str, bool | None]
) -> tuple[list[TrajectoryRecord], int, int]:
    """Override Y where the outcomes name the trajectory.

    Returns the records, how many were overridden and how many outcome ids matched no record
    (a sign of a wrong file or of ids written differently)."""
    out: list[TrajectoryRecord] = []
    used = 0
    for r in records:
        if r.trajectory_id in outcomes:
            used += 1
            r = dataclasses.replace(r, success=outcomes[r.trajectory_id])
        out.append(r)
    return out, used, len(outcomes) - used
