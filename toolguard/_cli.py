"""``toolguard report`` and ``toolguard compare``: span files in, prefix-executability out.

Errors print one line on stderr and exit with status 2; a traceback means a bug in toolguard.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import math
import os
import sys
from collections.abc import Sequence

from ._cli_args import Args, build_parser
from ._commands import DELEGATED, EXIT_ERROR, delegate
from ._errors import ToolGuardError
from ._overwrite import input_named_by
from ._printable import printable
from .report.build import Report, build_report, outcome_warnings, read_warnings
from .report.compare import compare, render_compare
from .report.html import HTML_EXTRA_HINT
from .report.metrics import TrajectoryRecord
from .report.outcomes import join_outcomes, load_outcomes
from .report.phoenix import DEFAULT_DEADLINE_S, DEFAULT_MAX_PAGES, MAX_DEADLINE_S
from .report.plot import PLOT_EXTRA_HINT
from .report.read import read_phoenix, read_records
from .report.reader import ReadStats
from .report.render import render_csv, render_markdown, render_text


def _check_source(args: Args) -> None:
    """Span files or one backend, never both: before anything is read."""
    if args.mlflow is not None or args.experiment is not None:
        if args.mlflow is None:
            raise ToolGuardError("--experiment goes with --mlflow URL")
        if args.files or args.phoenix is not None:
            raise ToolGuardError("give span files, --phoenix or --mlflow, one of them")
        if not args.experiment:
            raise ToolGuardError("--mlflow needs --experiment ID (the MLflow experiment to read)")
        return
    if args.phoenix is None:
        if not args.files:
            raise ToolGuardError(
                "no input: give span files, or --phoenix URL --project NAME, or --mlflow URL "
                "--experiment ID (report: or --clickhouse URL)"
            )
        if args.project is not None or args.api_key_env is not None:
            raise ToolGuardError("--project and --api-key-env go with --phoenix URL")
        if args.phoenix_max_pages is not None or args.phoenix_deadline is not None:
            raise ToolGuardError("--phoenix-max-pages and --phoenix-deadline go with --phoenix URL")
        return
    if args.files:
        raise ToolGuardError("give either span files or --phoenix, not both")
    if not args.project:
        raise ToolGuardError("--phoenix needs --project NAME (the Phoenix project to read)")
    _phoenix_bounds(args)


def _phoenix_bounds(args: Args) -> tuple[int, float]:
    """``--phoenix-max-pages`` and ``--phoenix-deadline``, or the library's defaults."""
    pages, seconds = args.phoenix_max_pages, args.phoenix_deadline
    max_pages = DEFAULT_MAX_PAGES
    if pages is not None:
        try:
            max_pages = int(pages)
        except ValueError:
            max_pages = 0
        if max_pages < 1:
            raise ToolGuardError(
                f"--phoenix-max-pages: expected a whole number of pages >= 1, got {pages!r}"
            )
    deadline = DEFAULT_DEADLINE_S
    if seconds is not None:
        try:
            deadline = float(seconds)
        except ValueError:
            deadline = math.nan
        if not 0 < deadline <= MAX_DEADLINE_S:  # nan too
            raise ToolGuardError(
                f"--phoenix-deadline: expected a number of seconds > 0 and at most "
                f"{MAX_DEADLINE_S:.0f}, got {seconds!r}"
            )
    return max_pages, deadline


def _api_key(var: str | None) -> str | None:
    if var is None:
        return None
    key = os.environ.get(var, "").strip()
    if not key:
        raise ToolGuardError(f"--api-key-env {var}: the environment variable {var} is not set")
    return key


def _read(args: Args) -> tuple[list[TrajectoryRecord], list[str]]:
    _check_source(args)
    if args.resamples < 0:
        raise ToolGuardError("--resamples must be >= 0")
    if args.seed < 0:
        raise ToolGuardError("--seed must be >= 0")
    outcomes = load_outcomes(args.outcomes) if args.outcomes else None
    stats: ReadStats
    # Each parsed line is thousands of short-lived containers, freed by reference counting
    # alone (nothing the read keeps makes a cycle); the cyclic collector would only walk them
    # again and again. The command owns its process, so it turns the collector off for the
    # read (the library call leaves it alone) and restores it whatever happens.
    cost = bool(getattr(args, "cost", False))  # `compare` has no --cost
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        if args.mlflow is not None:
            from .report.mlflow import read_mlflow

            records, stats = read_mlflow(
                args.mlflow,
                args.experiment or "",
                max_length=args.max_length,
                cost=cost,
                skip_invalid=args.skip_invalid,
            )
        elif args.phoenix is not None:
            max_pages, deadline = _phoenix_bounds(args)
            records, stats = read_phoenix(
                args.phoenix,
                args.project or "",
                api_key=_api_key(args.api_key_env),
                max_length=args.max_length,
                max_page_bytes=args.max_line_bytes,
                max_pages=max_pages,
                deadline=deadline,
                cost=cost,
                skip_invalid=args.skip_invalid,
            )
        else:
            records, stats = read_records(
                args.files,
                skip_invalid=args.skip_invalid,
                progress=False if args.quiet else None,
                max_line_bytes=args.max_line_bytes,
                max_length=args.max_length,
                input_format=args.input_format,
                cost=cost,
            )
    finally:
        if gc_was_on:
            gc.enable()
    warnings = read_warnings(stats)
    if outcomes is not None and args.outcomes:  # outcomes were read from args.outcomes
        records, used, unmatched = join_outcomes(records, outcomes)
        warnings += outcome_warnings(args.outcomes, used, unmatched)
    return records, warnings


def _clickhouse_report(args: Args) -> Report:
    """The report computed by ClickHouse (report/clickhouse.py): one query, nothing read
    span by span here."""
    if args.files or args.phoenix is not None or args.mlflow is not None:
        raise ToolGuardError("give span files, --phoenix, --mlflow or --clickhouse, one of them")
    if args.outcomes:
        raise ToolGuardError(
            "--outcomes is not joined with --clickhouse: the outcomes come from the summary "
            "spans in the table (report the spans from a file to join an outcomes file)"
        )
    if args.resamples < 0 or args.seed < 0:
        raise ToolGuardError("--resamples and --seed must be >= 0")
    from .report.clickhouse import clickhouse_report
    from .report.clickhouse_sql import quote_table

    try:
        quote_table(args.table)
    except ValueError as exc:
        raise ToolGuardError(f"--table {exc}") from None
    return clickhouse_report(
        args.clickhouse or "",
        args.table,
        by=args.by,
        where=args.where,
        max_length=args.max_length,
        cost=args.cost,
        skip_invalid=args.skip_invalid,
        seed=args.seed,
        resamples=args.resamples,
    )


def _pairs(keys: list[str], values: str, flag: str) -> dict[str, str]:
    vals = [v.strip() for v in values.split(",")] if len(keys) > 1 else [values]
    if len(vals) != len(keys):
        raise ToolGuardError(f"{flag} needs {len(keys)} comma-separated values, one per --by key")
    return dict(zip(keys, vals, strict=True))


def _run(args: Args) -> str:
    clash = (
        input_named_by(args.out, [*args.files, *filter(None, [args.outcomes])])
        if args.out
        else None
    )
    if clash is not None:
        raise ToolGuardError(f"--out {args.out} is the input {clash}: writing it would lose it")
    if args.format == "html" and importlib.util.find_spec("plotly") is None:
        raise ToolGuardError(HTML_EXTRA_HINT)  # before a long read, as for --plot
    if args.command == "report":
        if args.plot and importlib.util.find_spec("matplotlib") is None:
            # Before reading: a long read should not end in "could not plot".
            raise ToolGuardError(PLOT_EXTRA_HINT)
        records: list[TrajectoryRecord] | None = None
        if args.clickhouse is not None:
            report = _clickhouse_report(args)
        else:
            if args.where is not None or args.table != "otel_traces":
                raise ToolGuardError("--table and --where go with --clickhouse URL")
            records, warnings = _read(args)
            report = build_report(
                records,
                by=args.by,
                seed=args.seed,
                resamples=args.resamples,
                warnings=warnings,
                cost=args.cost,
            )
        if args.plot:
            from .report.plot import plot_report

            plot_report(report, args.plot)
        if args.format == "html":
            from .report.html import render_html

            return render_html(report, records, by=args.by, title=_title(args))
        return _format(report, args.format, args.depths)
    a, b = _pairs(args.by, args.a, "--a"), _pairs(args.by, args.b, "--b")
    if a == b:  # every difference 0, its interval of width 0: a typo, not a finding
        raise ToolGuardError(f"--a and --b name the same group ({args.a!r}): nothing to compare")
    records, warnings = _read(args)
    result = compare(
        records, a, b, task_label=args.task_label, seed=args.seed, resamples=args.resamples
    )
    result["warnings"] = warnings + result["warnings"]
    if args.format == "html":
        from .report.html import render_html

        # The two sides' own report beside the paired differences, on their trajectories.
        chosen = [r for r in records if _is(r, a) or _is(r, b)]
        side_report = build_report(chosen, by=args.by, seed=args.seed, resamples=args.resamples)
        return render_html(side_report, chosen, by=args.by, title=_title(args), comparison=result)
    if args.format == "json":
        return json.dumps(result, indent=2) + "\n"
    return render_compare(result)


def _is(record: TrajectoryRecord, want: dict[str, str]) -> bool:
    return all(record.labels.get(k) == v for k, v in want.items())


def _title(args: Args) -> str:
    # File names, not their paths: a page is shared, where the reader's paths mean nothing.
    names = ", ".join(os.path.basename(f) or f for f in args.files)
    source = args.phoenix or args.mlflow or getattr(args, "clickhouse", None) or names
    return f"toolguard {args.command}: {source}"


def _format(report: Report, fmt: str, depths: int) -> str:
    if fmt == "json":
        return json.dumps(report, indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        return render_csv(report)
    if fmt == "markdown":
        return render_markdown(report, depths)
    return render_text(report, depths)


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ToolGuardError(f"--out {path}: cannot write: {exc.strerror or exc}") from None
    print(f"toolguard: wrote {path}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``toolguard`` command once its dependencies are imported (the command itself is
    ``toolguard.__main__.main``, which says which extra is missing); returns the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in DELEGATED:
        return delegate(words[0], words[1:])
    try:
        args = build_parser().parse_args(argv, namespace=Args())
    except SystemExit as exc:  # argparse has printed its usage message already
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        out = _run(args)
        if args.out:
            _write(args.out, out)
        else:
            sys.stdout.write(out)
            sys.stdout.flush()
    except ToolGuardError as exc:
        # Messages may quote what the input held: no control character reaches the terminal.
        print(f"toolguard: error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # `toolguard report ... | head` is not an error
        # Point stdout at /dev/null so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("toolguard: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # as replay: one line, not a traceback that may itself not fit
        print("toolguard: error: out of memory", file=sys.stderr)
        return EXIT_ERROR
    return 0
