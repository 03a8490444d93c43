"""Paired comparison of two groups on the same tasks (``toolguard compare``).

Overlapping marginal intervals say nothing about a paired difference; this estimates it
directly: per task, the metric in each group (averaged over repeats), the difference B - A,
and a bootstrap over tasks of the mean difference.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TypedDict

from .escape import printable, short_id
from .metrics import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    TrajectoryRecord,
    bootstrap_mean_ci,
)
from .reader import ReportInputError
from .render import group_name

DEFAULT_TASK_LABEL = "task"
Value = Callable[[TrajectoryRecord], float | None]

# Per-trajectory value whose per-task mean is the metric; None leaves the trajectory out,
# exactly as the cohort definitions do (T = 0 for AUC-PEC, unknown Y for final success).
METRICS: dict[str, Value] = {
    "ter": lambda r: float(r.executable),
    "auc_pec": lambda r: (r.fed - 1) / r.length if r.length else None,
    "final_success": lambda r: None if r.success is None else float(r.success),
}


class PairedMetric(TypedDict):
    """One metric of a comparison: the means over the paired tasks and their difference."""

    a: float | None
    b: float | None
    diff: float | None
    ci: Interval | None
    n_paired: int


class Comparison(TypedDict):
    """What ``compare`` returns (and ``toolguard compare --format json`` prints)."""

    a: dict[str, str]
    b: dict[str, str]
    task_label: str
    n_tasks_a: int
    n_tasks_b: int
    n_paired: int
    metrics: dict[str, PairedMetric]
    warnings: list[str]


def _select(records: Sequence[TrajectoryRecord], want: dict[str, str]) -> list[TrajectoryRecord]:
    return [r for r in records if all(r.labels.get(k) == v for k, v in want.items())]


def _per_task(recs: list[TrajectoryRecord], value: Value, task: str) -> dict[str, float]:
    acc: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        v = value(r)
        if v is not None:
            acc[r.labels[task]].append(v)
    return {t: sum(vs) / len(vs) for t, vs in acc.items()}


def compare(
    records: Sequence[TrajectoryRecord],
    a: dict[str, str],
    b: dict[str, str],
    *,
    task_label: str = DEFAULT_TASK_LABEL,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Comparison:
    """Compare group ``a`` with group ``b`` (label values), paired on ``task_label``."""
    warnings: list[str] = []
    sides: dict[str, list[TrajectoryRecord]] = {}
    for side, want in (("a", a), ("b", b)):
        chosen = _select(records, want)
        if not chosen:
            seen = sorted({str(r.labels.get(k)) for r in records for k in want})
            more = f", ... ({len(seen) - 10} more)" if len(seen) > 10 else ""
            raise ReportInputError(
                f"no trajectory has {short_id(group_name(want))} (values seen: "
                f"{', '.join(short_id(v, 40) for v in seen[:10])}{more})"
            )
        untasked = [r for r in chosen if task_label not in r.labels]
        if untasked:
            warnings.append(
                f"{len(untasked)} trajectories of {group_name(want)} lack label "
                f"'{task_label}' and cannot be paired"
            )
        sides[side] = [r for r in chosen if task_label in r.labels]
    tasks_a = {r.labels[task_label] for r in sides["a"]}
    tasks_b = {r.labels[task_label] for r in sides["b"]}
    paired = tasks_a & tasks_b
    if not paired:
        raise ReportInputError(
            f"{group_name(a)} and {group_name(b)} share no '{task_label}' label value: "
            "nothing to pair"
        )
    for side, mine, other in (("a", tasks_a, tasks_b), ("b", tasks_b, tasks_a)):
        if mine - other:
            warnings.append(
                f"{len(mine - other)} tasks appear only in {group_name(a if side == 'a' else b)}"
                " and are left out"
            )
    metrics: dict[str, PairedMetric] = {}
    for name, value in METRICS.items():
        va = _per_task(sides["a"], value, task_label)
        vb = _per_task(sides["b"], value, task_label)
        common = sorted(set(va) & set(vb) & paired)
        diffs = [vb[t] - va[t] for t in common]
        k = len(common)
        metrics[name] = {
            "a": sum(va[t] for t in common) / k if k else None,
            "b": sum(vb[t] for t in common) / k if k else None,
            "diff": sum(diffs) / k if k else None,
            "ci": bootstrap_mean_ci(diffs, seed=seed, resamples=resamples),
            "n_paired": k,
        }
    repeats = sum(len(s) for s in sides.values()) - len(tasks_a) - len(tasks_b)
    if repeats:
        warnings.append(
            "some tasks have several trajectories in a group: each task's value is their mean"
        )
    return {
        "a": a,
        "b": b,
        "task_label": task_label,
        "n_tasks_a": len(tasks_a),
        "n_tasks_b": len(tasks_b),
        "n_paired": len(paired),
        "metrics": metrics,
        "warnings": warnings,
    }


def _signed(v: float | None) -> str:
    return "-" if v is None else f"{v:+.3f}"


def render_compare(result: Comparison) -> str:
    a, b = printable(group_name(result["a"])), printable(group_name(result["b"]))
    lines = [
        f"A = {a}   B = {b}   paired on label '{printable(result['task_label'])}': "
        f"{result['n_paired']} tasks (A has {result['n_tasks_a']}, B has {result['n_tasks_b']})",
        "",
    ]
    head = ["metric", "A", "B", "B - A", "95% paired bootstrap CI", "tasks"]
    rows = [head]
    for name, m in result["metrics"].items():
        ci = m["ci"]
        rows.append(
            [
                name,
                "-" if m["a"] is None else f"{m['a']:.3f}",
                "-" if m["b"] is None else f"{m['b']:.3f}",
                _signed(m["diff"]),
                "-" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]",
                str(m["n_paired"]),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        lines.append(
            "  ".join(
                [r[0].ljust(widths[0])]
                + [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
            )
        )
    if result["warnings"]:
        lines += ["", "Warnings", *(f"- {printable(w)}" for w in result["warnings"])]
    return "\n".join(lines) + "\n"
