"""What the HTML report shows, as one JSON-ready dict: the groups' figures, the Plotly figures
(plain Plotly JSON: plotly.js draws them in the page) and the trajectory table.

Every string that came from spans (labels, ids, tool names, checks, messages, recorded
content) goes through ``printable`` first (control characters as visible escapes). The page's
script puts table text in with ``textContent`` (never parsed as HTML); Plotly parses a small
HTML subset in trace names and tick labels, so those also go through ``plotly_text`` (entities
for ``<``, ``>`` and ``&``: plotly.js shows them as the characters). html.py then embeds the
dict as JSON with ``<``, ``>`` and ``&`` written as ``\\u`` escapes: no span text can close the
script element that holds it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._contract import CAUSES
from .escape import printable, short_id
from .metrics import UNKNOWN_CAUSE, TrajectoryRecord
from .render import group_name

if TYPE_CHECKING:
    from .build import GroupMetrics, Report
    from .compare import Comparison

DEFAULT_MAX_ROWS = 20_000
"""Most trajectories listed in the page's table (the figures always count every one): 10,000
trajectories make about 1 MB of table data; a larger cohort lists its first ones by id and the
page says how many were left out."""
_NAME_CUT = 80  # legend entries and tick labels: the table shows a label in full
_ANNOTATED_BARS = 6  # more bars than this leave no room for a note above each
Json = dict[str, Any]


def plotly_text(text: str, cut: int = _NAME_CUT) -> str:
    """Span text for a Plotly name or tick label: shown as written, never as Plotly's HTML."""
    return html.escape(short_id(text, cut), quote=False)


def _causes(groups: Sequence[GroupMetrics]) -> list[str]:
    names = list(CAUSES)
    if any(g["causes"].get(UNKNOWN_CAUSE) for g in groups):
        names.append(UNKNOWN_CAUSE)
    return names


def _group_row(name: str, g: GroupMetrics) -> Json:
    keys = (
        "n",
        "ter",
        "mean_fed",
        "auc_pec",
        "rr",
        "rr_eligible",
        "s",
        "s_eligible",
        "final_success",
        "n_outcome_known",
        "incomplete",
        "disagreements",
    )
    row: Json = {"name": printable(name), **{k: g[k] for k in keys}}  # type: ignore[literal-required]
    row["ci"] = dict(g["ci"])
    row["causes"] = dict(g["causes"])
    return row


def _pec_figure(groups: Sequence[tuple[str, GroupMetrics]]) -> Json:
    """PEC@k (solid) and PEC-eligible@k (dotted) per group; one legend group per group, so a
    click on its legend entry toggles both curves."""
    traces: list[Json] = []
    for i, (name, g) in enumerate(groups):
        ks = list(range(1, len(g["pec"]) + 1))
        label = plotly_text(name)
        common = {
            "type": "scatter",
            "mode": "lines+markers",
            "x": ks,
            "customdata": g["n_at_depth"],
            "legendgroup": f"g{i}",
        }
        traces.append(
            {
                **common,
                "y": g["pec"],
                "name": f"{label} (N={g['n']})",
                "line": {"color": _colour(i)},
                "hovertemplate": "k=%{x}<br>PEC=%{y:.3f}<br>n at depth=%{customdata}",
            }
        )
        traces.append(
            {
                **common,
                "y": g["pec_elig"],
                "name": f"{label}: eligible",
                "line": {"color": _colour(i), "dash": "dot"},
                "hovertemplate": "k=%{x}<br>PEC-eligible=%{y:.3f}<br>n at depth=%{customdata}",
            }
        )
    return {
        "data": traces,
        "layout": {
            "title": {"text": "PEC@k (solid) and PEC-eligible@k (dotted)", "x": 0.02},
            "xaxis": {"title": {"text": "depth k (tool calls)"}, "dtick": 1},
            "yaxis": {"title": {"text": "share executable through k"}, "range": [-0.02, 1.02]},
            "hovermode": "closest",
            "legend": {"orientation": "h", "y": -0.25},
            "margin": {"t": 40},
        },
    }


def _axis(names: Sequence[str]) -> Json:
    # Groups are placed by index, named by tick text: two groups whose printable names
    # coincide stay two bars.
    return {
        "tickvals": list(range(len(names))),
        "ticktext": [plotly_text(n) for n in names],
        "type": "linear",
        "automargin": True,
        "tickangle": 0 if len(names) <= 3 else -30,
    }


def _cause_figure(groups: Sequence[tuple[str, GroupMetrics]], causes: Sequence[str]) -> Json:
    names = [n for n, _ in groups]
    idx = list(range(len(groups)))
    traces = [
        {
            "type": "bar",
            "name": cause,
            "x": idx,
            "y": [g["causes"].get(cause, 0) for _, g in groups],
            "customdata": idx,
            "meta": cause,
            "hovertemplate": f"{cause}: %{{y}} first errors<extra></extra>",
            "marker": {"color": _CAUSE_COLOURS.get(cause, "#7f7f7f")},
        }
        for cause in causes
    ]
    return {
        "data": traces,
        "layout": {
            "title": {"text": "First-error causes (click a bar: its trajectories)", "x": 0.02},
            "barmode": "stack",
            "xaxis": _axis(names),
            "yaxis": {"title": {"text": "trajectories with FED <= T"}},
            "margin": {"t": 40},
        },
    }


def _decomposition_figure(groups: Sequence[tuple[str, GroupMetrics]]) -> Json:
    """Pr(Y=1) = q*s + (1-q)*r per group: TER x S and (1 - TER) x RR stacked, final success as
    a marker; RR and RR-eligible in every hover and bar text. S, RR and final success count
    the trajectories whose outcome is known, so q here does too (docs/protocol.md 3.2: the
    identity holds over them); with every outcome known it is the group's TER."""
    idx = list(range(len(groups)))
    qs, fr, text, notes, finals = [], [], [], [], []
    unknown = False
    for _, g in groups:
        known = g["n_outcome_known"]
        unknown |= known < g["n"]
        q = (known - g["rr_eligible"]) / known if known else g["ter"] or 0.0
        s = g["s"] or 0.0
        r = g["rr"] or 0.0
        qs.append(q * s)
        fr.append((1 - q) * r)
        rr = "-" if g["rr"] is None else f"{g['rr']:.3f}"
        text.append(f"RR {rr} (RR-eligible {g['rr_eligible']})")
        notes.append(f"RR {rr}<br>elig. {g['rr_eligible']}")
        finals.append(g["final_success"])
    return {
        "data": [
            {
                "type": "bar",
                "name": "TER x S (executable and successful)",
                "x": idx,
                "y": qs,
                "hovertemplate": "TER x S = %{y:.3f}<extra></extra>",
                "marker": {"color": "#2ca02c"},
            },
            {
                "type": "bar",
                "name": "(1 - TER) x RR (recovered)",
                "x": idx,
                "y": fr,
                "text": text,
                "textposition": "none",
                "hovertemplate": "(1 - TER) x RR = %{y:.3f}<br>%{text}<extra></extra>",
                "marker": {"color": "#ff7f0e"},
            },
            {
                "type": "scatter",
                "mode": "markers",
                "name": "final success",
                "x": idx,
                "y": finals,
                "marker": {"symbol": "line-ew-open", "size": 28, "color": "#000"},
                "hovertemplate": "final success = %{y:.3f}<extra></extra>",
            },
        ],
        "layout": {
            "title": {
                "text": "Pr(Y=1) = TER x S + (1 - TER) x RR"
                + (", over the trajectories with a known outcome" if unknown else ""),
                "x": 0.02,
            },
            "barmode": "stack",
            # RR beside RR-eligible above each bar: a rate with its denominator (in every
            # hover too, and side by side in the groups table; above the bars while they fit).
            "annotations": [
                {
                    "x": i,
                    "y": 1.0,
                    "yanchor": "bottom",
                    "text": short,
                    "showarrow": False,
                    "font": {"size": 10},
                }
                for i, short in enumerate(notes)
            ]
            if len(notes) <= _ANNOTATED_BARS
            else [],
            "xaxis": _axis([n for n, _ in groups]),
            "yaxis": {"title": {"text": "share of trajectories"}, "range": [0, 1.15]},
            "margin": {"t": 40},
        },
    }


def _compare_figure(result: Comparison) -> Json:
    names = list(result["metrics"])
    diffs = [result["metrics"][m]["diff"] for m in names]
    lo, hi = [], []
    for m in names:
        ci, d = result["metrics"][m]["ci"], result["metrics"][m]["diff"]
        lo.append(None if ci is None or d is None else d - ci[0])
        hi.append(None if ci is None or d is None else ci[1] - d)
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "markers",
                "name": "B - A",
                "x": diffs,
                "y": names,
                "error_x": {"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
                "hovertemplate": "%{y}: B - A = %{x:+.3f}<extra></extra>",
            }
        ],
        "layout": {
            "title": {"text": "Paired difference B - A (95% paired bootstrap interval)"},
            "xaxis": {"zeroline": True, "title": {"text": "B - A"}},
            "margin": {"t": 40, "l": 110},
        },
    }


def _trajectory_table(
    records: Sequence[TrajectoryRecord],
    group_of: Mapping[str, int],
    max_rows: int,
) -> Json:
    """Column arrays with repeated strings (tools, checks, messages) stored once each."""
    strings: dict[str, int] = {}

    def ref(text: str | None) -> int | None:
        if text is None:
            return None
        text = printable(text)
        i = strings.get(text)
        if i is None:
            i = strings[text] = len(strings)
        return i

    shown = list(records[:max_rows])
    cols: dict[str, list[Any]] = {
        k: []
        for k in ("id", "group", "t", "fed", "y", "cause", "tool", "check", "msg", "args", "res")
    }
    for r in shown:
        fe = r.first_error
        cols["id"].append(printable(r.trajectory_id))
        cols["group"].append(group_of[r.trajectory_id])
        cols["t"].append(r.length)
        cols["fed"].append(r.fed)
        cols["y"].append(None if r.success is None else int(r.success))
        cols["cause"].append(None if r.executable else ref(r.first_error_cause or UNKNOWN_CAUSE))
        cols["tool"].append(ref(fe.tool) if fe else None)
        cols["check"].append(ref(fe.check) if fe else None)
        cols["msg"].append(ref(fe.message) if fe else None)
        cols["args"].append(ref(fe.arguments) if fe else None)
        cols["res"].append(ref(fe.result) if fe else None)
    content = any(v is not None for v in cols["args"] + cols["res"])
    if not content:
        del cols["args"], cols["res"]
    return {"strings": list(strings), "cols": cols, "total": len(records), "shown": len(shown)}


_PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
)  # fmt: skip
_CAUSE_COLOURS = {
    "schema": "#d62728",
    "dependency": "#ff7f0e",
    "precondition": "#9467bd",
    "state_consistency": "#8c564b",
    "information": "#17becf",
    UNKNOWN_CAUSE: "#7f7f7f",
}


def _colour(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]


def page_data(
    report: Report,
    records: Sequence[TrajectoryRecord] | None,
    by: Sequence[str],
    *,
    title: str = "toolguard report",
    comparison: Comparison | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> Json:
    """Everything the page shows. ``records`` are the trajectories the report was built from
    (None: the figures only, e.g. a report computed in SQL); ``by`` its grouping keys."""
    groups = [(group_name(g["labels"]), g) for g in report["groups"]]
    table_rows = [_group_row(n, g) for n, g in groups]
    if len(groups) > 1:
        table_rows.append({**_group_row("all", report["overall"]), "overall": True})
    causes = _causes([g for _, g in groups])
    data: Json = {
        "title": printable(title),
        "by": [printable(k) for k in by],
        "groups": table_rows,
        "group_names": [printable(n) for n, _ in groups],
        "causes": causes,
        "warnings": [printable(w) for w in report["warnings"]],
        "figures": {
            "pec": _pec_figure(groups),
            "causes": _cause_figure(groups, causes),
            "decomposition": _decomposition_figure(groups),
        },
        "trajectories": None,
        "comparison": None,
    }
    if records is not None:
        index = {tuple(g["labels"].get(k) for k in by): i for i, (_, g) in enumerate(groups)}
        group_of = {r.trajectory_id: index[tuple(r.labels.get(k) for k in by)] for r in records}
        data["trajectories"] = _trajectory_table(records, group_of, max_rows)
    if comparison is not None:
        data["comparison"] = {
            "a": printable(group_name(comparison["a"])),
            "b": printable(group_name(comparison["b"])),
            "task_label": printable(comparison["task_label"]),
            "n_paired": comparison["n_paired"],
            "n_tasks_a": comparison["n_tasks_a"],
            "n_tasks_b": comparison["n_tasks_b"],
            "metrics": {k: dict(v) for k, v in comparison["metrics"].items()},
            "warnings": [printable(w) for w in comparison["warnings"]],
        }
        data["figures"]["compare"] = _compare_figure(comparison)
    return data
