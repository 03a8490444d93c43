"""``toolguard infer SOURCE... --out contract.toml``: a contract proposed from recorded runs.

Bad input never ends in a traceback: a file that cannot be read, a tool with no accepted
call, sources with no recorded result are warnings naming the file or tool; the contract is
then written empty and the exit status is 0. A wrong option is status 2, as argparse says.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator, Sequence

from .._argtypes import positive
from .._errors import ToolGuardError
from .._overwrite import input_named_by
from .._printable import printable
from ..replay.jsonstream import DEFAULT_MAX_ELEMENT_BYTES, DEFAULT_MAX_STRING_BYTES
from ..replay.model import RecordedRun
from ..replay.sources import FORMATS, read_runs
from .explain import explain
from .flow import Flow, trace_runs
from .propose import propose
from .render import render
from .spans import SPAN_FORMATS, SpanRead, span_runs
from .values import MAX_INITIAL_PLACES, CommonRule

EXIT_ERROR = 2


class _Args(argparse.Namespace):
    sources: list[str]
    out: str
    format: str
    min_support: int
    min_share: float
    min_distinct: int
    min_length: int
    min_int: int
    max_initial_places: int
    explain: bool
    show_values: bool
    max_element_bytes: int
    max_string_bytes: int


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], not {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="toolguard infer",
        description="Propose a contract (refs + produces, grounded) from recorded runs: "
        "where each accepted call's argument values first appeared. Deterministic; nothing "
        "read is evaluated; recorded values stay out of the file unless --show-values.",
    )
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="recorded runs (replay's)")
    p.add_argument("--out", required=True, metavar="FILE", help="contract file to write")
    p.add_argument(
        "--format",
        choices=(*FORMATS, *SPAN_FORMATS),
        default="openai",
        help="replay's formats, or a span file written with record_content=True (spans; mcp: "
        "the recording of `toolguard mcp-proxy --record`) (default: openai)",
    )
    p.add_argument(
        "--min-support",
        type=positive,
        default=5,
        metavar="N",
        help="trajectories a rule needs evidence in (%(default)s)",
    )
    p.add_argument(
        "--min-distinct",
        type=positive,
        default=5,
        metavar="N",
        help="distinct values a rule needs evidence from: runs repeating one scenario are "
        "not independent evidence (%(default)s)",
    )
    p.add_argument(
        "--min-share",
        type=_share,
        default=0.95,
        metavar="P",
        help="share of an argument's values a rule must pass (%(default)s)",
    )
    p.add_argument(
        "--min-length",
        type=positive,
        default=3,
        metavar="N",
        help="strings shorter than N characters are too common to be evidence (%(default)s)",
    )
    p.add_argument(
        "--min-int",
        type=positive,
        default=100,
        metavar="N",
        help="numbers with abs < N are too common to be evidence (%(default)s)",
    )
    p.add_argument(
        "--max-initial-places",
        type=positive,
        default=MAX_INITIAL_PLACES,
        metavar="N",
        help="a run's initial state with more mapping places than N (a whole database) is "
        "not traced as a source, with a warning (%(default)s)",
    )
    p.add_argument(
        "--max-element-bytes",
        type=positive,
        default=DEFAULT_MAX_ELEMENT_BYTES,
        metavar="N",
        help="longest JSON text of one run or span file line, in bytes (%(default)s); a "
        "longer one makes its source unread, with a warning",
    )
    p.add_argument(
        "--max-string-bytes",
        type=positive,
        default=DEFAULT_MAX_STRING_BYTES,
        metavar="N",
        help="longest string in a JSON document, in bytes (%(default)s)",
    )
    p.add_argument("--explain", action="store_true", help="print the sources per argument")
    p.add_argument("--show-values", action="store_true", help="put example values in the comments")
    return p


def _unique(runs: Iterable[RecordedRun], ids: dict[str, int]) -> Iterator[RecordedRun]:
    """Run ids unique across the sources, as replay makes them within one read (a repeat
    gets ``~2``, ``~3``...): two files' ``r0`` are two trajectories of evidence."""
    for run in runs:
        count = ids.get(run.id, 0) + 1
        ids[run.id] = count
        if count > 1:
            # Past ids a run of the input already has (a recorded "r0~2"): one id, one run.
            while (renamed := f"{run.id}~{count}") in ids:
                count += 1
            ids[run.id] = count
            ids[renamed] = 1
            run.id = renamed
        yield run


def main(argv: Sequence[str] | None = None) -> int:
    """``toolguard infer``; returns the exit status."""
    try:
        args = _parser().parse_args(argv, namespace=_Args())
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        return _infer(args)
    except KeyboardInterrupt:  # as replay and report: one line, status 130
        print("toolguard: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # one line, not a traceback that may itself not fit
        print("toolguard: error: out of memory", file=sys.stderr)
        return EXIT_ERROR


def _infer(args: _Args) -> int:
    clash = input_named_by(args.out, args.sources)
    if clash is not None:
        print(
            f"toolguard: error: --out {args.out} is the source {clash}: writing the contract "
            "there would lose it",
            file=sys.stderr,
        )
        return EXIT_ERROR
    flow = Flow()
    rule = CommonRule(min_length=args.min_length, min_int=args.min_int)
    unread = 0
    ids: dict[str, int] = {}
    for source in args.sources:
        try:
            read = SpanRead()
            element, string = args.max_element_bytes, args.max_string_bytes
            runs = (
                span_runs(source, read, max_element_bytes=element, max_string_bytes=string)
                if args.format in SPAN_FORMATS
                else read_runs(
                    args.format, [source], max_element_bytes=element, max_string_bytes=string
                )
            )
            trace_runs(
                _unique(runs, ids),
                rule=rule,
                keep_values=args.show_values,
                flow=flow,
                max_initial_places=args.max_initial_places,
            )
            flow.warnings.extend(read.warnings)
            flow.files += 1
        except (ToolGuardError, OSError) as exc:
            unread += 1
            flow.warnings.append(f"{source}: not read as {args.format}: {exc}")
    flow.warn_empty()
    proposals = propose(
        flow,
        min_support=args.min_support,
        min_share=args.min_share,
        min_distinct=args.min_distinct,
    )
    if unread:
        # Rules from part of the input (mixed formats, say) are not the evidence asked for.
        flow.warnings.append(
            f"{unread} source(s) could not be read as {args.format}: no rule written "
            "(give each format's files to their own `toolguard infer`)"
        )
        proposals = []
    elif not proposals and flow.runs:
        flow.warnings.append(
            f"no rule reached min-support {args.min_support}, min-distinct "
            f"{args.min_distinct} and min-share "
            f"{args.min_share:g} (--explain shows the sources per argument)"
        )
    text = render(
        proposals,
        flow,
        min_support=args.min_support,
        min_share=args.min_share,
        min_distinct=args.min_distinct,
        show_values=args.show_values,
    )
    try:
        with open(args.out, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    except OSError as exc:
        print(f"toolguard: error: cannot write {args.out}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    # Names and ids come from the recording: no control character of theirs reaches the
    # terminal (the report's rule).
    for warning in flow.warnings:
        print(f"toolguard: warning: {printable(warning)}", file=sys.stderr)
    if args.explain:
        # split("\n"), not splitlines(): a name holding U+2028 stays one row, escaped.
        sys.stdout.write("\n".join(map(printable, explain(flow).split("\n"))))
    print(
        f"inferred {len(proposals)} rule(s) from {flow.runs} trajectories: {os.fspath(args.out)}",
        file=sys.stderr,
    )
    return 0
