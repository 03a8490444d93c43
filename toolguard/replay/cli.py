"""``toolguard replay FORMAT FILE... --out spans.jsonl``: the metrics of recorded runs.

Errors print one line on standard error and exit with status 2, as ``toolguard report``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .._argtypes import positive
from .._errors import ToolGuardError
from .._overwrite import input_named_by
from .._printable import printable
from .jsonstream import DEFAULT_MAX_ELEMENT_BYTES, DEFAULT_MAX_STRING_BYTES
from .sources import FORMATS

EXIT_ERROR = 2

EPILOG = """\
formats:
  openai  OpenAI chat messages: JSON Lines (one run per line) or a JSON list of runs; a run
          is a list of messages or an object with messages/traj (tau-bench's shape) and
          optional id, task_id, trial, reward, success/outcome, labels, tools.
  tau2    a tau2 results file (its simulations), or a list / JSON Lines of simulations.
  bfcl    BFCL multi-turn result files; with bfcl-eval installed each call runs on BFCL's
          own backends (fresh for every task), which give the answers the files do not
          record; an "Error during inference" entry is a failed trajectory of no call
          (label inference_error); --bfcl-scores joins BFCL's verdicts as outcomes.
  toolsandbox  ToolSandbox run directories (trajectories/*/conversation.json and
          result_summary.json) or conversation.json files; a tool answer ending in a
          Python exception line is invalid; Y: similarity 1.

readings (the `replay` label of each trajectory; a report says which by --by replay):
  environment    always: a call is invalid when the environment said it failed: the tool
                 message's error flag (tau2's error, is_error) where it has one, else an
                 {"error": ...} result or a text starting "Error:" (tau2 files without the
                 flag too); BFCL: the answer of BFCL's own backend, run for each call.
  with_contract  --contract FILE: each call also checked as the guard would have (schema,
                 dependencies, preconditions, ...). For BFCL the guard runs the calls on
                 the live backends, so predicates read their state as `instance`
                 (`python -m benchmarks.bfcl contract` writes the harness's rules as one).
  dry_run        --dry-run (bfcl only): each call first tried in an undo log on the live
                 backends and rejected when it fails there; the run's own schemas, no
                 hand-written rule (not the contract's).
compare two readings with
  toolguard compare OUT --by replay --a environment --b with_contract --task-label run
"""


class _Args(argparse.Namespace):
    format: str
    files: list[str]
    out: str
    contract: str | None
    labels: dict[str, str]
    id_prefix: str | None
    skip_invalid: bool
    append: bool
    quiet: bool
    max_element_bytes: int
    max_string_bytes: int
    bfcl_scores: str | None
    dry_run: bool


def _labels(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"expected key=value, got {part.strip()!r}")
        out[key.strip()] = value.strip()
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="toolguard replay",
        description="Replay recorded agent runs through the guard and write the spans that "
        "`toolguard report` reads: TER, FED, AUC-PEC and RR without re-running the agent.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("format", choices=FORMATS, metavar="FORMAT", help=", ".join(FORMATS))
    p.add_argument("files", nargs="+", metavar="FILE", help="recorded runs ('-': stdin)")
    p.add_argument("--out", required=True, metavar="SPANS", help="span file to write (JSONL)")
    p.add_argument("--contract", metavar="FILE", help="a contract file (TOML): the what-if")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="bfcl: also replay each run as replay=dry_run: every call tried first in an undo "
        "log on BFCL's live backends, no hand-written rule",
    )
    p.add_argument(
        "--labels", type=_labels, default={}, metavar="KEY=VALUE,...", help="added to every run"
    )
    p.add_argument(
        "--id-prefix",
        metavar="PREFIX",
        help="put PREFIX in every trajectory id (environment/PREFIX/<run id>) so two recorded "
        "runs of one model (two methods, two serving stacks) stay two cohorts in one span "
        "file (default: from --labels, e.g. method=react; '' for none)",
    )
    p.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip malformed runs (counted, the first one named) instead of stopping",
    )
    p.add_argument(
        "--append",
        action="store_true",
        help="append to SPANS instead of replacing; refused when a trajectory id is already "
        "there (it would merge two recorded runs): give --id-prefix or other --labels",
    )
    p.add_argument(
        "--bfcl-scores",
        metavar="DIR",
        help="bfcl: BFCL's score directory (score/<model>/multi_turn/..._score.json, or a "
        "model's, or the folder of the score files): BFCL's own verdicts become the outcomes, "
        "so final success and RR print; refused when a score file does not match its result "
        "file",
    )
    p.add_argument("--quiet", action="store_true", help="no progress line on standard error")
    p.add_argument(
        "--max-element-bytes",
        type=positive,
        default=DEFAULT_MAX_ELEMENT_BYTES,
        metavar="N",
        help="longest JSON text of one run (a JSON Lines line, one element of a JSON list, a "
        "line of a BFCL file), in bytes (%(default)s); a longer one is an invalid run",
    )
    p.add_argument(
        "--max-string-bytes",
        type=positive,
        default=DEFAULT_MAX_STRING_BYTES,
        metavar="N",
        help="longest string in a JSON document, in bytes (%(default)s); a run holding a "
        "longer one is invalid (a JSON Lines line, and so a BFCL file's, has "
        "--max-element-bytes alone)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``toolguard replay``; ``argv`` are the arguments after ``replay``. Returns the exit
    status."""
    try:
        args = _parser().parse_args(argv, namespace=_Args())
    except SystemExit as exc:  # argparse printed its message already
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    if args.bfcl_scores and args.format != "bfcl":
        print("toolguard: error: --bfcl-scores is for the bfcl format", file=sys.stderr)
        return EXIT_ERROR
    inputs = [*args.files, *filter(None, [args.contract])]
    clash = input_named_by(args.out, inputs)
    if clash is not None:
        print(
            f"toolguard: error: --out {args.out} is the input {clash}: writing the spans there "
            "would lose it",
            file=sys.stderr,
        )
        return EXIT_ERROR
    from .api import replay_files  # the SDK and exporter load only for a real run

    try:
        stats = replay_files(
            args.format,
            args.files,
            args.out,
            contract=args.contract,
            labels=args.labels,
            id_prefix=args.id_prefix,
            skip_invalid=args.skip_invalid,
            append=args.append,
            progress=False if args.quiet else None,
            max_element_bytes=args.max_element_bytes,
            max_string_bytes=args.max_string_bytes,
            bfcl_scores=args.bfcl_scores,
            dry_run=args.dry_run,
        )
    except ToolGuardError as exc:  # a ReplayMemoryError too: it names the file and line
        # Messages quote what the input held (keys, ids): no control character of theirs
        # reaches the terminal (the report's rule).
        print(f"toolguard: error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryError:  # anywhere else: one line, not a traceback that may itself not fit
        print("toolguard: error: out of memory", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("toolguard: interrupted", file=sys.stderr)
        return 130
    print(
        f"replayed {stats.runs} runs ({stats.calls} tool calls) from {len(stats.files)} "
        f"file(s): {stats.trajectories} trajectories written to {args.out}"
    )
    if stats.unknown_contract_tools:
        print(
            "toolguard: warning: the contract names tool(s) no replayed run offered or called, "
            "whose rules checked nothing (misspelt?): "
            f"{printable(', '.join(stats.unknown_contract_tools))}",
            file=sys.stderr,
        )
    if stats.unused_contract_arguments:
        print(
            "toolguard: warning: the contract names argument(s) that no replayed call of "
            "their tool carried, whose rules checked nothing (misspelt? the runs record no "
            f"schema to say): {printable(', '.join(stats.unused_contract_arguments))}",
            file=sys.stderr,
        )
    if stats.skipped:
        print(
            f"toolguard: warning: skipped {stats.skipped} invalid run(s); first: "
            f"{printable(stats.first_skipped or '')}",
            file=sys.stderr,
        )
    if stats.bfcl_eval:
        scored = (
            f"; outcomes: BFCL's verdicts ({stats.bfcl_scored} entries)"
            if stats.bfcl_scored
            else ""
        )
        print(f"BFCL backends: bfcl-eval {stats.bfcl_eval}{scored}", file=sys.stderr)
    if stats.inference_errors:
        print(
            f"toolguard: note: {stats.inference_errors} BFCL entr(y/ies) recorded an inference "
            "error: counted as trajectories of no call, not successful (label "
            "inference_error=true), as BFCL scores them",
            file=sys.stderr,
        )
    if stats.without_environment:
        print(
            f"toolguard: warning: {stats.without_environment} BFCL run(s) had no backend to "
            "answer their calls (bfcl-eval not installed, or a task it does not know): only "
            "a contract's checks can fail them",
            file=sys.stderr,
        )
    readings = ["environment"] + ["with_contract"] * bool(args.contract)
    readings += ["dry_run"] * args.dry_run
    print(f"readings: {', '.join(readings)} (label replay)", file=sys.stderr)
    if not args.quiet:
        by = " --by replay" if len(readings) > 1 else ""
        print(f"next: toolguard report {os.fspath(args.out)}{by}", file=sys.stderr)
    return 0
