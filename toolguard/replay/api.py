"""``replay_files``: recorded runs in, a span file that ``toolguard report`` reads out."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterable, Mapping
from typing import TextIO

from .. import Contract, load_contract  # the public names, not the runtime's modules
from .._errors import ToolGuardError
from .._extras import is_missing, missing_extra
from . import existing
from .engine import Replayer
from .jsonstream import DEFAULT_MAX_ELEMENT_BYTES, DEFAULT_MAX_STRING_BYTES
from .model import RecordedRun, ReplayInputError
from .sources import ReplayStats, read_runs

# A batch processor drops spans once its queue is full: the replay flushes every FLUSH_EVERY
# spans, so the queue never holds more than that.
FLUSH_EVERY = 4096
QUEUE_SIZE = 4 * FLUSH_EVERY


def replay_files(
    format: str,
    files: Iterable[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    contract: str | os.PathLike[str] | Contract | None = None,
    labels: Mapping[str, str] | None = None,
    id_prefix: str | None = None,
    skip_invalid: bool = False,
    append: bool = False,
    progress: bool | None = False,
    max_element_bytes: int = DEFAULT_MAX_ELEMENT_BYTES,
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES,
    bfcl_scores: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
) -> ReplayStats:
    """Replay every run of ``files`` (``format``: ``openai``, ``tau2`` or ``bfcl``) through a
    guard and write the spans to ``out`` (OTLP JSON Lines; replaced unless ``append``).

    Each run becomes trajectory ``environment/<run id>`` (label ``replay=environment``);
    with ``contract`` (a contract file or a loaded :class:`Contract`) also
    ``with_contract/<run id>`` (``replay=with_contract``), labelled ``run=<run id>`` and
    ``task=<task id>`` so ``toolguard compare --by replay --task-label run`` pairs them.
    ``labels`` are added to every trajectory. ``id_prefix`` goes into every trajectory id
    (``environment/<id prefix>/<run id>``) so that runs of one model recorded with different
    methods stay apart in one span file; None (the default) derives it from ``labels``
    (``method=react``, sorted keys joined by ``,``), ``""`` means none. With ``append``, a
    trajectory id already in ``out`` is refused before anything is written (its spans would
    merge two recorded runs into one trajectory). ``progress``: a line on standard error (None:
    when it is a terminal). ``max_element_bytes``, ``max_string_bytes``: the reader's bounds
    on one run's JSON text and on one string in it (openai and tau2 files). ``bfcl_scores``:
    BFCL's score directory, whose verdicts become the BFCL runs' outcomes. ``dry_run``: also
    replay every run as ``dry_run/<run id>`` (``replay=dry_run``): each call tried first in
    an undo log on the live environment (BFCL's backends; no other format has one) and
    rejected when it fails there, with the run's own schemas and no hand-written rule (not
    ``contract``'s). Returns what was read and written."""
    try:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        if not is_missing(exc, "export"):
            raise
        raise missing_extra("replay_files", "export", exc) from exc

    if dry_run and format != "bfcl":
        raise ReplayInputError(
            f"a dry run needs a live environment to fork, which only the bfcl format has "
            f"(BFCL's backends), not {format}"
        )
    loaded = load_contract(contract) if isinstance(contract, str | os.PathLike) else contract
    out = os.fspath(out)
    labels = dict(labels or {})
    if "replay" in labels:
        # Every reading would carry the one value: `--by replay` could not tell them apart.
        raise ReplayInputError(
            "labels: 'replay' is the reading each trajectory is (environment, with_contract, "
            "dry_run), set by the replay itself: name your label otherwise"
        )
    if id_prefix is None:
        id_prefix = default_id_prefix(labels)
    already = existing.trajectories(out) if append else {}
    stats = ReplayStats()
    runs = read_runs(
        format,
        files,
        skip_invalid=skip_invalid,
        stats=stats,
        max_element_bytes=max_element_bytes,
        max_string_bytes=max_string_bytes,
        bfcl_scores=bfcl_scores,
    )
    first = next(runs, None)  # read before the output is touched: bad input leaves it alone
    if first is None:
        what = f"no valid run ({stats.skipped} skipped)" if stats.skipped else "no run"
        raise ReplayInputError(f"{', '.join(stats.files) or 'no input files'}: {what}")
    directory = os.path.dirname(os.path.abspath(out))
    # An append goes to a file of its own first, joined to ``out`` once the whole replay
    # succeeded: a refused or failed append leaves ``out`` as it was.
    target = f"{out}.{os.getpid()}.part" if append else out
    try:
        if os.path.isdir(out):  # an append would find out only when joining, at the end
            raise IsADirectoryError(21, "Is a directory")
        os.makedirs(directory, exist_ok=True)
        open(target, "w").close()
    except OSError as exc:
        raise ToolGuardError(f"{out}: cannot write the spans: {exc.strerror or exc}") from None
    provider = TracerProvider(resource=Resource.create({"service.name": "toolguard-replay"}))
    provider.add_span_processor(
        BatchSpanProcessor(
            FileSpanExporter(target), max_queue_size=QUEUE_SIZE, max_export_batch_size=2048
        )
    )
    replayer = Replayer(
        provider,
        contract=loaded,
        labels=labels,
        id_prefix=id_prefix,
        dry_run=dry_run,
        flush_every=FLUSH_EVERY,
    )
    meter = _Progress(progress)
    failed = completed = False
    try:
        run: RecordedRun | None = first
        while run is not None:
            for cohort in replayer.cohorts:
                if already:
                    _refuse_merge(out, replayer, run, cohort, already)
                replayer.replay(run, cohort)
                stats.trajectories += 1
            meter.update(stats)
            run = next(runs, None)
        stats.unknown_contract_tools = replayer.unknown_contract_tools()
        stats.unused_contract_arguments = replayer.unused_contract_arguments()
        completed = True
    except (ReplayInputError, MemoryError):
        failed = True
        raise
    finally:
        meter.done()
        provider.shutdown()  # exports what is queued, closes the file
        if append:  # joined only when whole
            if completed:
                _join(target, out)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(target)
        elif failed:  # input found bad half-way leaves no half span file
            with contextlib.suppress(OSError):
                os.unlink(out)
    return stats


def default_id_prefix(labels: Mapping[str, str]) -> str:
    """The id prefix ``--labels`` implies: ``k=v`` pairs by sorted key, joined by ``,``."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _refuse_merge(
    out: str,
    replayer: Replayer,
    run: RecordedRun,
    cohort: str,
    already: Mapping[str, Mapping[str, str]],
) -> None:
    tid = replayer.trajectory_id(run, cohort)
    if tid not in already:
        return
    theirs = dict(already[tid])
    mine = replayer.trajectory_labels(run, cohort)
    differ = sorted(k for k in {*theirs, *mine} if theirs.get(k) != mine.get(k))
    shown = ", ".join(f"{k}: {theirs.get(k)!r} there, {mine.get(k)!r} here" for k in differ)
    how = (
        f"with other labels ({shown})"
        if differ
        else "with the same labels (this replay was appended already?)"
    )
    raise ReplayInputError(
        f"{out}: trajectory {tid!r} ({run.where}) is already in the file {how}; appending "
        "would merge two recorded runs into one trajectory. Give --id-prefix (or --labels "
        "that tell the runs apart), or write to another file. Nothing was appended."
    )


def _join(part: str, out: str) -> None:
    try:
        with open(out, "ab") as dst, open(part, "rb") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(part)


class _Progress:
    """One line on standard error, rewritten at most five times a second."""

    def __init__(self, enabled: bool | None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._next = time.monotonic() + 0.5  # short inputs show nothing
        self._shown = False

    def update(self, stats: ReplayStats) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + 0.2
        self._shown = True
        where = stats.files[-1] if stats.files else ""
        self.stream.write(
            f"\rreplaying {where}: {stats.runs:,} runs, {stats.calls:,} calls"
            + (f", {stats.skipped:,} skipped" if stats.skipped else "")
            + " "
        )
        self.stream.flush()

    def done(self) -> None:
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
