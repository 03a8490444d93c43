"""ToolSandbox runs (apple/ToolSandbox): its ``conversation.json`` trajectories as runs.

ToolSandbox writes one run directory per agent and user simulator,
``agent_<model>_user_<user>_<MM_DD_YYYY_HH_MM_SS>/``, holding ``result_summary.json`` and
``trajectories/<scenario>/conversation.json``. A conversation is a JSON list of messages in
the OpenAI shape (``serialize_to_conversation``): ``system`` and ``user`` messages, the
agent's ``assistant`` messages with ``tool_calls`` (arguments as JSON text), and ``tool``
messages (``tool_call_id``, ``name``, ``content``) with the execution environment's answer;
``<role>_details`` keys (database updates, milestone matches) are ignored.

Validity: the environment runs each call as Python and answers with what it printed; when
the tool raised, the answer's last line is the exception (``NoDataError: ...``, the last
line of the traceback on standard error) or, for code that did not compile or was
incomplete, a ``...Error:`` line or an ``Error: ...`` text. Any of these makes the call
invalid; any other answer (a result's ``repr``) is valid.

Outcome: ``result_summary.json``'s ``per_scenario_results`` entry for the scenario:
success when its ``similarity`` (the milestone similarity ToolSandbox reports) is 1 within
1e-6 and no exception ended the scenario; no summary: unknown (join your own outcomes with
``toolguard report --outcomes``). Labels: ``model`` and ``user`` from the run directory's
name when it has ToolSandbox's shape, ``scenario``.

A path is a run directory (every ``trajectories/*/conversation.json`` in it, in name order)
or one ``conversation.json`` (its run directory's summary is used when it is two levels up).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .chat import grouped
from .jsonstream import DEFAULT_MAX_ELEMENT_BYTES, DEFAULT_MAX_STRING_BYTES
from .messages import events_of, text_of
from .model import RecordedRun, ReplayInputError

CONVERSATION = "conversation.json"
SUMMARY = "result_summary.json"
_RUN_DIR = re.compile(
    r"^agent_(?P<model>.+)_user_(?P<user>.+)_\d{2}_\d{2}_\d{4}_\d{2}_\d{2}_\d{2}$"
)
# The last line of a Python traceback: an exception's (dotted) name ending in Error,
# Exception, Exit or Interrupt, then ``:`` or the end of the line.
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::|$)"
)


def error_of(message: Mapping[str, Any], result: Any) -> bool:
    """ToolSandbox's verdict on a call, from the execution environment's answer."""
    text = text_of(message.get("content")).strip()
    if not text:
        return False
    if text.startswith(("Error:", "Traceback (most recent call last)")):
        return True
    return bool(_EXCEPTION.match(text.splitlines()[-1].strip()))


def conversations(path: str) -> list[tuple[Path, Path | None]]:
    """(conversation.json, its run directory or None) for one path."""
    where = Path(path)
    if where.is_dir():
        found = sorted(where.glob(f"trajectories/*/{CONVERSATION}"))
        if not found and (where / CONVERSATION).is_file():
            found = [where / CONVERSATION]
        if not found:
            raise ReplayInputError(
                f"{path}: no ToolSandbox trajectory (trajectories/*/{CONVERSATION}) in it"
            )
        return [(f, where if f.parent.parent.name == "trajectories" else None) for f in found]
    run_dir = where.parent.parent.parent
    has_run = where.parent.parent.name == "trajectories" and (run_dir / SUMMARY).is_file()
    return [(where, run_dir if has_run else None)]


def outcomes(run_dir: Path | None) -> dict[str, bool]:
    """Scenario name -> success, from the run directory's result_summary.json."""
    if run_dir is None or not (run_dir / SUMMARY).is_file():
        return {}
    where = os.fspath(run_dir / SUMMARY)
    try:
        summary = json.loads((run_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise ReplayInputError(f"{where}: cannot read a ToolSandbox summary: {exc}") from None
    rows = summary.get("per_scenario_results") if isinstance(summary, Mapping) else None
    if not isinstance(rows, list):
        raise ReplayInputError(f"{where}: no 'per_scenario_results' list")
    out: dict[str, bool] = {}
    for row in rows:
        if not isinstance(row, Mapping) or not isinstance(row.get("name"), str):
            raise ReplayInputError(f"{where}: a per-scenario result without a 'name'")
        similarity = row.get("similarity")
        if isinstance(similarity, bool) or not isinstance(similarity, int | float):
            raise ReplayInputError(f"{where}: scenario {row['name']!r} has no numeric similarity")
        out[row["name"]] = abs(float(similarity) - 1.0) <= 1e-6 and not row.get("exception_type")
    return out


def runs(
    path: str,
    *,
    max_element_bytes: int = DEFAULT_MAX_ELEMENT_BYTES,
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES,
) -> Iterator[RecordedRun | ReplayInputError]:
    """The runs of one path (a run directory or a conversation.json), in name order; a
    conversation that cannot be read comes as its ReplayInputError, so a caller may skip it
    and go on (an unreadable path or summary raises)."""
    known: dict[Path | None, dict[str, bool]] = {}
    for conversation, run_dir in conversations(path):
        if run_dir not in known:
            known[run_dir] = outcomes(run_dir)
        try:
            yield _run(conversation, run_dir, known[run_dir], max_element_bytes, max_string_bytes)
        except ReplayInputError as exc:
            yield exc


def _run(
    conversation: Path,
    run_dir: Path | None,
    outcome: Mapping[str, bool],
    max_element_bytes: int,
    max_string_bytes: int,
) -> RecordedRun:
    scenario = conversation.parent.name
    where = os.fspath(conversation)
    values = list(
        grouped(where, max_element_bytes=max_element_bytes, max_string_bytes=max_string_bytes)
    )
    if len(values) != 1 or values[0].error is not None or not isinstance(values[0].value, list):
        why = values[0].error if values and values[0].error else "not one list of messages"
        raise ReplayInputError(f"{where}: a ToolSandbox conversation is a JSON list ({why})")
    labels = {"scenario": scenario}
    match = _RUN_DIR.match(run_dir.name) if run_dir is not None else None
    if match:
        labels.update(model=match["model"], user=match["user"])
    return RecordedRun(
        f"{run_dir.name}/{scenario}" if run_dir is not None else scenario,
        events_of(values[0].value, where, error=error_of),
        where,
        success=outcome.get(scenario),
        task=scenario,
        labels=labels,
    )
