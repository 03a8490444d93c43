"""The command line of ``toolguard report`` and ``toolguard compare``: their flags, and the
namespace they parse into (_cli.py runs them).
"""

from __future__ import annotations

import argparse

from ._argtypes import positive
from ._commands import DELEGATED
from .report.collect import DEFAULT_MAX_LENGTH
from .report.compare import DEFAULT_TASK_LABEL
from .report.inputs import INPUT_FORMATS
from .report.metrics import DEFAULT_RESAMPLES, DEFAULT_SEED
from .report.phoenix import DEFAULT_DEADLINE_S, DEFAULT_MAX_PAGES
from .report.reader import DEFAULT_MAX_LINE_BYTES
from .report.render import DEFAULT_DEPTHS


class Args(argparse.Namespace):
    """The parsed command line. ``plot`` and ``depths`` exist for ``report`` only; ``a``, ``b``
    and ``task_label`` for ``compare`` only."""

    command: str
    files: list[str]
    outcomes: str | None
    skip_invalid: bool
    seed: int
    resamples: int
    quiet: bool
    max_line_bytes: int
    max_length: int
    input_format: str
    phoenix: str | None
    mlflow: str | None
    experiment: str | None
    project: str | None
    api_key_env: str | None
    phoenix_max_pages: str | None
    phoenix_deadline: str | None
    by: list[str]
    clickhouse: str | None
    table: str
    where: str | None
    cost: bool
    format: str
    out: str | None
    plot: str | None
    depths: int
    a: str
    b: str
    task_label: str


def _keys(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise argparse.ArgumentTypeError("expected one or more label keys, comma-separated")
    return keys


def _input_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="span files (OTLP JSON Lines, or a saved Phoenix span export); globs, '-' for "
        "standard input, .gz read as gzip",
    )
    p.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        default="auto",
        help="format of the files (%(default)s: told apart by their first key)",
    )
    p.add_argument(
        "--phoenix",
        metavar="URL",
        help="read the spans from the Phoenix server at URL (e.g. http://localhost:6006) "
        "instead of files; needs --project",
    )
    p.add_argument("--project", metavar="NAME", help="the Phoenix project to read (--phoenix)")
    p.add_argument(
        "--mlflow",
        metavar="URL",
        help="read the spans from the MLflow tracking server at URL (e.g. http://localhost:5000) "
        "through MLflow's client instead of files; needs --experiment and the mlflow extra",
    )
    p.add_argument("--experiment", metavar="ID", help="the MLflow experiment id to read (--mlflow)")
    p.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the Phoenix API key, sent as a bearer token",
    )
    # Taken as text and checked with the source: a bad value is then one line, as every
    # other error of the command, not argparse's usage and message.
    p.add_argument(
        "--phoenix-max-pages",
        metavar="N",
        help=f"most pages one --phoenix pull follows ({DEFAULT_MAX_PAGES}); more is an error "
        "(an endless cursor chain)",
    )
    p.add_argument(
        "--phoenix-deadline",
        metavar="SECONDS",
        help=f"longest a whole --phoenix pull may take, every page and byte of it "
        f"({DEFAULT_DEADLINE_S:g}); a pull still going then is an error",
    )
    p.add_argument(
        "--outcomes",
        metavar="FILE",
        help="outcomes joined by trajectory id, overriding the spans' (JSONL or CSV with "
        "columns trajectory_id,success)",
    )
    p.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip lines that are not trace exports and leave out spans that break the span "
        "contract (both counted in the warnings) instead of stopping",
    )
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed (%(default)s)")
    p.add_argument(
        "--resamples", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples (%(default)s)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress line on standard error")
    p.add_argument(
        "--max-line-bytes",
        type=positive,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="N",
        help="longest input line read, in bytes (%(default)s); a longer line is an input error",
    )
    p.add_argument(
        "--max-length",
        type=positive,
        default=DEFAULT_MAX_LENGTH,
        metavar="N",
        help="longest trajectory accepted (%(default)s): a step, T or FED beyond it is an input "
        "error",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolguard", description="Prefix-executability metrics from toolguard spans."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, summary in DELEGATED.items():  # listed here, parsed by their own modules
        sub.add_parser(name, help=summary, add_help=False)
    rep = sub.add_parser(
        "report",
        help="TER, FED, AUC-PEC, PEC@k, RR and final success per group",
        description="Read spans and print the prefix-executability report.",
    )
    _input_args(rep)
    rep.add_argument(
        "--by", type=_keys, default=[], metavar="KEY,...", help="group on toolguard.label.KEY"
    )
    rep.add_argument(
        "--format",
        choices=("table", "json", "csv", "markdown", "html"),
        default="table",
        help="output (html: one self-contained page, needs the html extra)",
    )
    _out_arg(rep)
    rep.add_argument(
        "--cost",
        action="store_true",
        help="add mean model tokens and tool time per trajectory (in tok, out tok, tool ms)",
    )
    rep.add_argument(
        "--clickhouse",
        metavar="URL",
        help="compute the report on ClickHouse, in SQL, from the OpenTelemetry Collector's "
        "otel_traces table (http://host:8123, clickhouse://user@host/db, chdb:///path); "
        "needs the clickhouse extra",
    )
    rep.add_argument(
        "--table",
        default="otel_traces",
        metavar="NAME",
        help="the table read with --clickhouse (%(default)s; database.table allowed)",
    )
    rep.add_argument(
        "--where",
        metavar="SQL",
        help="with --clickhouse: a SQL condition on the table's columns, your own SQL sent to "
        "your server as written, e.g. \"ServiceName = 'agent' AND Timestamp > now() - "
        'INTERVAL 7 DAY"',
    )
    rep.add_argument("--plot", metavar="FILE", help="write PEC curves to FILE (.png or .svg)")
    rep.add_argument(
        "--depths", type=positive, default=DEFAULT_DEPTHS, help="PEC depths shown in the table"
    )
    cmp_ = sub.add_parser(
        "compare",
        help="paired difference between two groups on the same tasks",
        description="Compare group A with group B, paired on a task label: B - A for TER, "
        "AUC-PEC and final success, with a paired bootstrap interval.",
    )
    _input_args(cmp_)
    cmp_.add_argument("--by", type=_keys, required=True, metavar="KEY,...", help="label key(s)")
    cmp_.add_argument("--a", required=True, metavar="VALUE,...", help="label value(s) of A")
    cmp_.add_argument("--b", required=True, metavar="VALUE,...", help="label value(s) of B")
    cmp_.add_argument(
        "--task-label",
        default=DEFAULT_TASK_LABEL,
        metavar="KEY",
        help="label that names the task (%(default)s)",
    )
    cmp_.add_argument(
        "--format",
        choices=("table", "json", "html"),
        default="table",
        help="output (html: one self-contained page, needs the html extra)",
    )
    _out_arg(cmp_)
    return parser


def _out_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        metavar="FILE",
        help="write the output to FILE instead of standard output (its path is printed on "
        "standard error)",
    )
