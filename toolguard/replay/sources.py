"""Recorded runs from files, one at a time, whatever the format."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from . import bfcl, bfcl_env, bfcl_scores, chat, toolsandbox
from .jsonstream import DEFAULT_MAX_ELEMENT_BYTES, DEFAULT_MAX_STRING_BYTES
from .model import Answer, RecordedCall, RecordedRun, ReplayInputError, Said, Turn

FORMATS = ("openai", "tau2", "bfcl", "toolsandbox")
INFERENCE_ERROR = "inference_error"  # label of a BFCL entry whose inference failed


@dataclass
class ReplayStats:
    """What a replay went through."""

    files: list[str] = field(default_factory=list)
    runs: int = 0
    calls: int = 0
    trajectories: int = 0
    skipped: int = 0
    first_skipped: str | None = None
    without_environment: int = 0  # BFCL runs replayed with no backend to answer their calls
    inference_errors: int = 0  # BFCL entries whose generator failed: T = 0, not successful
    bfcl_eval: str | None = None  # the bfcl-eval whose backends (and data) answered BFCL calls
    bfcl_scored: int = 0  # BFCL entries whose outcome is BFCL's own verdict (a score file)
    # the contract's tools that no replayed run offered or called (misspelt: they check nothing)
    unknown_contract_tools: list[str] = field(default_factory=list)
    # ``tool.argument (refs|grounded)``: contract arguments no replayed call of the tool carried
    unused_contract_arguments: list[str] = field(default_factory=list)

    def skip(self, why: str) -> None:
        self.skipped += 1
        if self.first_skipped is None:
            self.first_skipped = why


def read_runs(
    format: str,
    files: Iterable[str | os.PathLike[str]],
    *,
    skip_invalid: bool = False,
    stats: ReplayStats | None = None,
    max_element_bytes: int = DEFAULT_MAX_ELEMENT_BYTES,
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES,
    bfcl_scores: str | os.PathLike[str] | None = None,
) -> Iterator[RecordedRun]:
    """The runs of ``files`` in ``format`` (one of :data:`FORMATS`), in file order.

    ``bfcl_scores``: BFCL's score directory (or a model's, or a folder of score files);
    each BFCL result file's entries then get BFCL's own verdict as outcome
    (``bfcl_scores.py``), and a result file with no matching score file is an error.

    A malformed run raises :class:`ReplayInputError` naming its file and line (and run
    index), or with ``skip_invalid`` is counted in ``stats`` and passed over; so is a run
    whose JSON text is longer than ``max_element_bytes`` (a line of a BFCL file too) or holds
    a string longer than ``max_string_bytes`` (in a JSON document: a JSON Lines line, and so
    every BFCL file, has the element bound alone). Memory running out is a
    ``ReplayMemoryError``, never skipped. Run ids are made unique across the files (a repeat
    gets ``~2``, ``~3``...)."""
    if format not in FORMATS:
        raise ReplayInputError(f"unknown format {format!r} (known: {', '.join(FORMATS)})")
    stats = stats if stats is not None else ReplayStats()
    seen: dict[str, int] = {}
    for name in files:
        path = os.fspath(name)
        stats.files.append(path)
        if format == "bfcl":
            runs = _bfcl_runs(path, skip_invalid, stats, max_element_bytes, bfcl_scores)
        elif format == "toolsandbox":
            runs = _toolsandbox_runs(path, skip_invalid, stats, max_element_bytes, max_string_bytes)
        else:
            bounds = (max_element_bytes, max_string_bytes)
            runs = _chat_runs(format, path, skip_invalid, stats, bounds)
        for run in runs:
            count = seen.get(run.id, 0) + 1
            seen[run.id] = count
            if count > 1:
                # Past ids a run of the input already has (a recorded "r0~2"): two runs under
                # one trajectory id would be merged by the report.
                while (renamed := f"{run.id}~{count}") in seen:
                    count += 1
                seen[run.id] = count
                seen[renamed] = 1
                run.id = renamed
            stats.runs += 1
            stats.calls += run.length
            yield run


def _chat_runs(
    format: str, path: str, skip_invalid: bool, stats: ReplayStats, bounds: tuple[int, int]
) -> Iterator[RecordedRun]:
    tau2 = format == "tau2"
    values = chat.grouped(
        path,
        stream_key="simulations" if tau2 else None,
        keep=frozenset({"info"}) if tau2 else None,
        max_element_bytes=bounds[0],
        max_string_bytes=bounds[1],
    )
    for index, item in enumerate(values):
        where = f"{item.where} (run {index + 1})"
        try:
            if item.error is not None:
                raise ReplayInputError(f"{where}: {item.error}")
            if format == "tau2":
                yield chat.tau2_run(item.value, where, item.header, path, index)
            else:
                yield chat.openai_run(item.value, where, path, index)
        except ReplayInputError as exc:
            if not skip_invalid:
                raise
            stats.skip(str(exc))


def _toolsandbox_runs(
    path: str, skip_invalid: bool, stats: ReplayStats, max_element: int, max_string: int
) -> Iterator[RecordedRun]:
    """A ToolSandbox run directory's (or one conversation.json's) scenarios; with
    ``skip_invalid`` a malformed conversation is counted and passed over."""
    found = toolsandbox.runs(path, max_element_bytes=max_element, max_string_bytes=max_string)
    for run in found:
        if isinstance(run, ReplayInputError):
            if not skip_invalid:
                raise run
            stats.skip(str(run))
            continue
        yield run


def _bfcl_runs(
    path: str,
    skip_invalid: bool,
    stats: ReplayStats,
    max_element_bytes: int,
    scores_dir: str | os.PathLike[str] | None = None,
) -> Iterator[RecordedRun]:
    """BFCL entries as runs. With bfcl-eval installed, the task's user turns are the run's
    ``Said`` events, BFCL's backends its live environment and its function docs the offered
    tools; a result file of another BFCL version than the installed data (by its name's
    ``BFCL_vN`` prefix, or a task id or turn count the data does not have) is refused, the
    version named. Without bfcl-eval the calls are replayed with no answer to read (valid
    unless a contract says otherwise)."""
    model = bfcl.model_name(path)
    live = bfcl_env.available()
    if live:
        bfcl_env.check_version(path)
        stats.bfcl_eval = bfcl_env.version()
    scores = None
    if scores_dir is not None:
        scores = bfcl_scores.load(bfcl_scores.find(scores_dir, path, model))
    ids: list[str] = []
    skipped: list[str] = []
    entries = bfcl.iter_entries(
        path, skip_invalid=skip_invalid, skipped=skipped, max_element_bytes=max_element_bytes
    )
    for entry in entries:
        while skipped:
            stats.skip(skipped.pop(0))
        ids.append(entry.id)
        outcome = None
        if scores is not None:
            outcome = scores.success(entry.id)
            stats.bfcl_scored += 1
        if entry.inference_error is not None:
            # BFCL scores the entry as failed: a trajectory of no call, not successful, so N
            # and final success are BFCL's; the label tells them apart in a report.
            stats.inference_errors += 1
            yield RecordedRun(
                f"{model}/{entry.id}",
                [],
                entry.where,
                success=False,  # BFCL's verdict whatever the score file says
                task=entry.id,
                labels={
                    "model": model,
                    "category": bfcl.category_of(entry.id),
                    INFERENCE_ERROR: "true",
                },
            )
            continue
        known = bfcl_env.task(entry.id) if live else None
        if live:
            bfcl_env.check_task(entry, known)
        classes = tuple(known.get("involved_classes", ())) if known else ()
        by_turn: dict[int, list[list[bfcl.Call]]] = {}
        for turn, calls in entry.steps:
            by_turn.setdefault(turn, []).append(calls)
        questions = known.get("question", []) if known else []
        events: list[Said | Turn] = []
        for turn in range(max(entry.n_turns, len(questions))):
            if turn < len(questions):
                for message in questions[turn]:
                    if isinstance(message, dict) and isinstance(message.get("content"), str):
                        events.append(Said(message["content"]))
            for calls in by_turn.get(turn, ()):
                events.append(Turn([_recorded(c, classes, known is not None) for c in calls]))
        if known is None:
            stats.without_environment += 1
        labels = {"model": model, "category": bfcl.category_of(entry.id)}
        if known is not None:
            labels["bfcl_eval"] = bfcl_env.version()
        yield RecordedRun(
            f"{model}/{entry.id}",
            events,
            entry.where,
            success=outcome,
            task=entry.id,
            labels=labels,
            tools=bfcl_env.tool_schemas(classes) if known else None,
            environment=bfcl_env.environment(known) if known else None,
            null_as_default=True,  # BFCL's backends default such parameters to None
            initial=bfcl_env.initial_state(known) if known else None,
        )
    while skipped:
        stats.skip(skipped.pop(0))
    if scores is not None:
        scores.check(path, ids)


def _recorded(call: bfcl.Call, classes: tuple[str, ...], live: bool) -> RecordedCall:
    arguments = (
        bfcl_env.keyword_arguments(call, classes)
        if live
        else {**{f"_{i}": a for i, a in enumerate(call.args)}, **call.kwargs}
    )
    # Without a backend the environment's answer is unknown: read as no error.
    return RecordedCall(call.name, arguments, None, None if live else Answer(None, False))
