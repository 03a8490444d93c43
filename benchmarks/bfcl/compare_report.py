"""The comparison's tables, its targets (met or missed, and why) and the kinds of the
ground-truth flags, as Markdown.

A ground-truth flag is classified from what the data shows, not from a list of known cases:
the environment rejected the call itself; the call uses a function the task withholds at
that turn; an argument disagrees with BFCL's own function doc; an id the variant's user turns
no longer give although the base task's do; an id no user turn gives at all (the ground
truth skips the look-up an agent would need). Anything else is printed as unclassified.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks._compare import class_table, config_table, cost_table, targets
from benchmarks.bfcl import undo
from benchmarks.bfcl.configs import CONFIGS
from benchmarks.bfcl.data import load_category
from benchmarks.bfcl.guarded import user_values
from benchmarks.bfcl.mutations import normalised_calls

DATA_BUG = "data bug"
LOOKUP_SKIPPED = "lookup skipped"


def _task(task_id: str) -> Any:
    for category in ("miss_param", "miss_func", "long_context", "base"):
        prefix = f"multi_turn_{category}_"
        if task_id.startswith(prefix):
            return load_category(category)[int(task_id.removeprefix(prefix))]
    raise ValueError(f"not a BFCL multi-turn task id: {task_id!r}")


def _given(task: Any) -> set[Any]:
    return {v for turn in task.questions for m in turn for v in user_values(m["content"])}


def classify(flag: dict[str, Any]) -> tuple[str, str]:
    """(kind, why) of one guard flag on a ground-truth call."""
    check = str(flag.get("check"))
    if flag.get("env_rejected"):
        return DATA_BUG, "the environment rejects the ground truth's own call"
    if check == "schema.tool":
        return DATA_BUG, "calls a function the task withholds at that turn (miss_func)"
    if check.startswith("schema."):
        return DATA_BUG, "an argument disagrees with BFCL's function doc; the backend accepts it"
    if check.startswith("dependency."):
        task = _task(flag["task"])
        _, call = normalised_calls(task)[flag["step"] - 1]
        value = call.kwargs.get(check.removeprefix("dependency."))
        base = _task("multi_turn_base_" + task.id.rsplit("_", 1)[1])
        if value in _given(base):
            return DATA_BUG, f"{value!r} is in the base task's user turns, not this variant's"
        return LOOKUP_SKIPPED, f"{value!r} is never shown; a look-up call would reveal it"
    return "unclassified", f"{check}: no data fault found; the check may be wrong"


def flags_by_kind(summary: dict[str, Any], gt_flags: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Every ground-truth flag of every configuration, with its kind."""
    lines = [
        "| configuration | task | step | tool | check | env rejected too | kind | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in summary:
        for f in gt_flags.get(key, []):
            kind, why = classify(f)
            lines.append(
                f"| {CONFIGS[key].label} | {f['task']} | {f['step']} | `{f['tool']}` | "
                f"{f['check']} | {'yes' if f['env_rejected'] else 'no'} | {kind} | {why} |"
            )
    return lines


def ground_truth_flags(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["method"] == "ground_truth" and r["before_execution"]:
            out.setdefault(r["config"], []).append(
                {k: r[k] for k in ("task", "step", "tool", "check", "env_rejected")}
            )
    return out


def markdown(
    summary: dict[str, Any],
    records: Sequence[dict[str, Any]],
    costs: dict[str, dict[str, dict[str, Any]]],
    header: Sequence[str] = (),
    undo_log: dict[str, int] | None = None,
) -> str:
    """The whole comparison; ``costs``: fork strategy name -> cost summary (the first one is
    the strategy the configurations ran with, and the one the targets are checked on)."""
    lines = [*header, "", "## Configurations", "", *config_table(summary), ""]
    lines += ["## Environment rejections caught, by mutation class", "", *class_table(summary)]
    for name, cost in costs.items():
        lines += ["", f"## Cost per call with {name} (ground-truth calls, medians)", ""]
        lines += cost_table(cost)
    if undo_log is not None:
        lines += ["", "## Does the undo log undo exactly? (benchmarks/bfcl/undo.py)", ""]
        lines += undo.markdown(undo_log)
    first = next(iter(costs))
    lines += ["", f"## Targets (fork dry-run alone, {first})", ""]
    lines += targets(summary, costs[first], classify)
    lines += ["", "## Ground-truth flags by kind (flags before execution)", ""]
    lines += flags_by_kind(summary, ground_truth_flags(records))
    return "\n".join(lines) + "\n"
