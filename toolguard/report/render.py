"""The report for people (a text table in the paper's shape, Markdown) and for sheets (CSV).

Label values and trajectory ids come from span files anyone could write: every one printed
here goes through ``escape`` (no terminal escape sequence, no line break inside a row, no CSV
formula, no Markdown or HTML); docs/report-limits.md.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, TypeAlias

from .._contract import CAUSES
from .escape import csv_cell, markdown_cell, printable
from .metrics import UNKNOWN_CAUSE

if TYPE_CHECKING:
    from .build import GroupMetrics, Report

DEFAULT_DEPTHS = 10
_DASH = "-"


def group_name(labels: Mapping[str, str | None]) -> str:
    if not labels:
        return "all"
    return ", ".join(f"{k}={'(none)' if v is None else v}" for k, v in labels.items())


def _num(v: float | None, digits: int) -> str:
    return _DASH if v is None else f"{v:.{digits}f}"


def _with_ci(v: float | None, ci: Sequence[float] | None, digits: int = 3) -> str:
    if v is None:
        return _DASH
    if ci is None:
        return _num(v, digits)
    return f"{v:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


Row: TypeAlias = "tuple[str, GroupMetrics]"
Table = tuple[list[str], list[list[str]]]
_Depths = Literal["pec", "pec_elig"]
_Scalar = Literal["ter", "mean_fed", "auc_pec", "rr", "s", "final_success"]
_Count = Literal["n_empty", "rr_eligible", "n_outcome_known", "incomplete", "disagreements"]
_PerDepth = Literal["pec", "pec_elig", "n_at_depth"]
_CostKey = Literal[
    "n_with_tokens", "mean_input_tokens", "mean_output_tokens", "n_with_latency", "mean_tool_ms"
]
_Cell = str | int | float | None


def _rows(report: Report) -> list[Row]:
    """(name, metrics) per group, then the whole cohort when there are several groups."""
    rows: list[Row] = [(group_name(g["labels"]), g) for g in report["groups"]]
    if len(rows) > 1:
        rows.append(("all", report["overall"]))
    return rows


def _main_table(rows: list[Row]) -> Table:
    head = ["group", "N", "TER", "mean FED", "AUC-PEC", "RR-elig", "RR", "final success"]
    with_cost = any("cost" in g for _, g in rows)
    if with_cost:
        head += ["in tok", "out tok", "tool ms"]
    body = []
    for name, g in rows:
        ci = g["ci"]
        row = [
            name,
            str(g["n"]),
            _with_ci(g["ter"], ci["ter"]),
            _with_ci(g["mean_fed"], ci["mean_fed"], 2),
            _with_ci(g["auc_pec"], ci["auc_pec"]),
            str(g["rr_eligible"]),
            _with_ci(g["rr"], ci["rr"]),
            _with_ci(g["final_success"], ci["final_success"]),
        ]
        if with_cost:
            cost = g.get("cost")
            row += (
                [
                    _num(cost["mean_input_tokens"], 1),
                    _num(cost["mean_output_tokens"], 1),
                    _num(cost["mean_tool_ms"], 2),
                ]
                if cost
                else [_DASH] * 3
            )
        body.append(row)
    return head, body


def _depth_table(rows: list[Row], key: _Depths, depths: int) -> Table:
    k_max = min(depths, max((len(g[key]) for _, g in rows), default=0))
    head = ["group", *(f"@{k}" for k in range(1, k_max + 1))]
    body = []
    for name, g in rows:
        vals = g[key][:k_max]
        body.append([name, *(_num(v, 3) for v in vals), *[""] * (k_max - len(vals))])
    return head, body


def _cause_table(rows: list[Row]) -> Table:
    names = list(CAUSES)
    if any(g["causes"].get(UNKNOWN_CAUSE) for _, g in rows):
        names.append(UNKNOWN_CAUSE)
    head = ["group", "first errors", *names]
    body = [
        [name, str(sum(g["causes"].values())), *(str(g["causes"].get(c, 0)) for c in names)]
        for name, g in rows
    ]
    return head, body


def _text_table(head: list[str], body: list[list[str]]) -> str:
    head = [printable(c) for c in head]
    body = [[printable(c) for c in row] for row in body]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    return "\n".join([line(head), "  ".join("-" * w for w in widths), *map(line, body)])


def _md_table(head: list[str], body: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        # The first cell names the group (label values: escaped in full); the others are
        # numbers and names of our own.
        first, *rest = cells
        return (
            "| "
            + " | ".join([markdown_cell(first), *(printable(c).replace("|", "\\|") for c in rest)])
            + " |"
        )

    sep = "| " + " | ".join(["---", *["---:"] * (len(head) - 1)]) + " |"
    return "\n".join([line(head), sep, *map(line, body)])


def _sections(report: Report, depths: int) -> list[tuple[str, Table]]:
    rows = _rows(report)
    k_max = max((len(g["pec"]) for _, g in rows), default=0)
    shown = f"first {min(depths, k_max)} of {k_max} depths" if k_max > depths else "all depths"
    return [
        (
            "Prefix executability (95% intervals: Wilson; bootstrap for mean FED and AUC-PEC)",
            _main_table(rows),
        ),
        (
            f"PEC@k: share of all trajectories still executable at depth k ({shown})",
            _depth_table(rows, "pec", depths),
        ),
        (
            f"PEC-eligible@k: the same among trajectories that reached depth k ({shown})",
            _depth_table(rows, "pec_elig", depths),
        ),
        ("First-error causes (trajectories with FED <= T)", _cause_table(rows)),
    ]


def render_text(report: Report, depths: int = DEFAULT_DEPTHS) -> str:
    parts = [f"{title}\n{_text_table(*table)}" for title, table in _sections(report, depths)]
    if report["warnings"]:
        parts.append("Warnings\n" + "\n".join(f"- {printable(w)}" for w in report["warnings"]))
    return "\n\n".join(parts) + "\n"


def render_markdown(report: Report, depths: int = DEFAULT_DEPTHS) -> str:
    parts = [f"**{title}**\n\n{_md_table(*table)}" for title, table in _sections(report, depths)]
    if report["warnings"]:
        parts.append(
            "**Warnings**\n\n" + "\n".join(f"- {markdown_cell(w)}" for w in report["warnings"])
        )
    return "\n\n".join(parts) + "\n"


_SCALARS: tuple[_Scalar, ...] = ("ter", "mean_fed", "auc_pec", "rr", "s", "final_success")
_COUNTS: tuple[_Count, ...] = (
    "n_empty",
    "rr_eligible",
    "n_outcome_known",
    "incomplete",
    "disagreements",
)
_PER_DEPTH: tuple[_PerDepth, ...] = ("pec", "pec_elig", "n_at_depth")
_COST: tuple[_CostKey, ...] = (
    "n_with_tokens",
    "mean_input_tokens",
    "mean_output_tokens",
    "n_with_latency",
    "mean_tool_ms",
)


def render_csv(report: Report) -> str:
    """One row per group (and an ``all`` row when there are several), wide: PEC per depth in
    columns, blank past a group's largest T. Label values fill one column per label key,
    escaped (``escape.csv_cell``): no cell starts a formula."""
    rows = _rows(report)
    label_keys = list(report["groups"][0]["labels"]) if report["groups"] else []
    k_max = max((len(g["pec"]) for _, g in rows), default=0)
    head = [*map(csv_cell, label_keys), "n"]
    for m in _SCALARS:
        head += [m, f"{m}_lo", f"{m}_hi"]
    head += [*_COUNTS, *(f"cause_{c}" for c in (*CAUSES, UNKNOWN_CAUSE))]
    for key in _PER_DEPTH:
        head += [f"{key}_{k}" for k in range(1, k_max + 1)]
    with_cost = any("cost" in g for _, g in rows)
    if with_cost:
        head += list(_COST)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)
    for i, (_, g) in enumerate(rows):
        overall = i == len(report["groups"])  # the extra row past the groups
        cells: list[_Cell] = [("all" if overall else g["labels"].get(k)) for k in label_keys]
        cells.append(g["n"])
        for m in _SCALARS:
            ci: Sequence[float | None] = g["ci"][m] or (None, None)
            cells += [g[m], ci[0], ci[1]]
        cells += [g[c] for c in _COUNTS]
        cells += [g["causes"].get(c, 0) for c in (*CAUSES, UNKNOWN_CAUSE)]
        for key in _PER_DEPTH:
            vals: list[_Cell] = list(g[key])
            cells += vals + [None] * (k_max - len(vals))
        if with_cost:
            cost = g.get("cost")
            cells += [cost[c] if cost else None for c in _COST]
        w.writerow(
            [
                ""
                if c is None
                else repr(c)
                if isinstance(c, float)
                else csv_cell(c)
                if isinstance(c, str)
                else c
                for c in cells
            ]
        )
    return buf.getvalue()
