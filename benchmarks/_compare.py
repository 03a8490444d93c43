"""What the BFCL and tau2 comparisons share: per-configuration columns from call records,
the Markdown tables, and the issue's three targets for fork dry-run alone.

A call record: ``config``, ``method`` (ground_truth or a mutation class), ``task``,
``step``, ``tool``, ``backend``, ``env_rejected`` (the oracle), ``before_execution`` (the
guard flagged it before it ran: a pre-execution cause or the fork dry-run), ``dry_run``,
``check``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

DRY_RUN_CHECK = "state.dry_run"  # the check id of a rejection found on the fork


@dataclass(frozen=True)
class Config:
    """One guard configuration of the comparisons."""

    key: str
    label: str
    state_rules: bool  # the hand-written preconditions and grounded arguments
    dry_run: bool
    copy: bool = False  # dry-run on a copying fork instead of the transactional default


def configurations(copying_fork: str) -> dict[str, Config]:
    """(a) to (d) and (c'), whose copying fork the benchmark names (``a deep copy``)."""
    return {
        c.key: c
        for c in (
            Config("schema_deps", "(a) schema + dependencies", state_rules=False, dry_run=False),
            Config("hand_rules", "(b) hand rules", state_rules=True, dry_run=False),
            Config("fork", "(c) fork dry-run, no hand state rule", False, dry_run=True),
            Config("fork_rules", "(d) fork dry-run + hand rules", True, dry_run=True),
            Config(
                "fork_copy",
                f"(c') fork dry-run on {copying_fork}, no hand state rule",
                state_rules=False,
                dry_run=True,
                copy=True,
            ),
        )
    }


def summarise(records: Sequence[dict[str, Any]], labels: dict[str, str]) -> dict[str, Any]:
    """Per configuration: ground-truth false positives, catch rate of environment rejections
    before execution (per call and per trajectory's first rejection), flags by check."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys(r["config"] for r in records):
        mine = [r for r in records if r["config"] == key]
        gt = [r for r in mine if r["method"] == "ground_truth"]
        mut = [r for r in mine if r["method"] != "ground_truth"]
        out[key] = {
            "label": labels.get(key, key),
            "ground_truth": _columns(gt),
            "mutations": _columns(mut),
            "mutations_by_class": {
                k: _columns([r for r in mut if r["method"] == k])
                for k in dict.fromkeys(r["method"] for r in mut)
            },
            "false_positive_list": [
                {k: r[k] for k in ("task", "step", "tool", "check")}
                for r in gt
                if r["before_execution"] and not r["env_rejected"]
            ],
            "misses": [
                {k: r[k] for k in ("method", "task", "step", "tool", "backend")}
                for r in mine
                if r["env_rejected"] and not r["before_execution"]
            ],
        }
    return out


def _columns(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rejected = [r for r in rows if r["env_rejected"]]
    caught = [r for r in rejected if r["before_execution"]]
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rejected:
        first.setdefault((r["method"], r["task"]), r)  # records are in step order
    return {
        "calls": len(rows),
        "trajectories": len({(r["method"], r["task"]) for r in rows}),
        "env_rejections": len(rejected),
        "caught_before_execution": len(caught),
        "caught_by_dry_run": sum(r["dry_run"] for r in caught),
        # the dry run's own verdict, whatever check flagged the call first
        "rejected_by_dry_run": sum(r.get("dry_run_outcome") == "rejected" for r in rejected),
        "not_dry_run": dict(
            Counter(
                f"{r['check']} (dry run: {r.get('dry_run_outcome') or 'not run'})"
                for r in rejected
                if r.get("dry_run_outcome") != "rejected"
            )
        ),
        "flags_on_accepted": sum(r["before_execution"] and not r["env_rejected"] for r in rows),
        "first_rejections": len(first),
        "first_rejections_caught": sum(r["before_execution"] for r in first.values()),
        # the fork's verdict against the real execution that followed on the same state
        "dry_runs": sum(r.get("dry_run_outcome") in ("passed", "rejected") for r in rows),
        "dry_run_agrees": sum(
            (r.get("dry_run_outcome") == "rejected") == bool(r.get("real_rejected"))
            for r in rows
            if r.get("dry_run_outcome") in ("passed", "rejected")
        ),
        "dry_run_rejected_real_accepted": sum(
            r.get("dry_run_outcome") == "rejected" and not r.get("real_rejected") for r in rows
        ),
        "dry_run_passed_real_rejected": sum(
            r.get("dry_run_outcome") == "passed" and bool(r.get("real_rejected")) for r in rows
        ),
        "missed_by_backend": dict(
            Counter(str(r["backend"]) for r in rejected if not r["before_execution"])
        ),
    }


def _rate(caught: int, total: int) -> str:
    return f"{caught}/{total} ({100 * caught / total:.1f}%)" if total else "0/0"


def _alone(mu: dict[str, Any]) -> str:
    if not mu["dry_runs"]:
        return "-"
    return _rate(mu["rejected_by_dry_run"], mu["env_rejections"])


def _agreement(gt: dict[str, Any], mu: dict[str, Any]) -> str:
    runs = gt["dry_runs"] + mu["dry_runs"]
    return f"{gt['dry_run_agrees'] + mu['dry_run_agrees']}/{runs}" if runs else "-"


def config_table(summary: dict[str, Any]) -> list[str]:
    lines = [
        "| configuration | ground truth: env rejections caught | false positives (of "
        "accepted calls) | mutations: env rejections caught before execution | first "
        "rejection per trajectory caught | flags on accepted mutated calls | mutations' env "
        "rejections the dry run itself rejects | dry run's verdict = the real execution's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summary.values():
        gt, mu = s["ground_truth"], s["mutations"]
        accepted = gt["calls"] - gt["env_rejections"]
        lines.append(
            f"| {s['label']} | {gt['caught_before_execution']}/{gt['env_rejections']} | "
            f"{gt['flags_on_accepted']} (of {accepted}) | "
            f"{_rate(mu['caught_before_execution'], mu['env_rejections'])} | "
            f"{_rate(mu['first_rejections_caught'], mu['first_rejections'])} | "
            f"{mu['flags_on_accepted']} | {_alone(mu)} | {_agreement(gt, mu)} |"
        )
    return lines


def class_table(summary: dict[str, Any]) -> list[str]:
    keys = list(summary)
    lines = [
        "| mutation | env rejections | " + " | ".join(summary[k]["label"] for k in keys) + " |",
        "|---|---|" + "---|" * len(keys),
    ]
    first = summary[keys[0]]["mutations_by_class"]
    for cls, cols in first.items():
        cells = [
            str(summary[k]["mutations_by_class"][cls]["caught_before_execution"]) for k in keys
        ]
        lines.append(f"| {cls} | {cols['env_rejections']} | " + " | ".join(cells) + " |")
    return lines


def fork_overhead(c: dict[str, Any]) -> float | None:
    """What the dry run costs per call. A copying strategy runs the call twice (on the fork,
    then for real): its cost is the dry run's added time minus one execution (a copy on read
    pays its copies inside the call, not in fork()). A transactional one runs it once: its
    cost is all the time it adds."""
    if c.get("dry_run_added_us") is None or c.get("exec_us") is None:
        return None
    if c.get("transactional"):
        return float(c["dry_run_added_us"])
    return round(c["dry_run_added_us"] - c["exec_us"], 1)


def cost_table(cost: dict[str, dict[str, Any]]) -> list[str]:
    executor = any("executor_us" in c for c in cost.values())
    lines = [
        "| backend | calls | environment's execution | "
        + ("BFCL's executor (eval of the call, its answer) | " if executor else "")
        + "fork() + discard() (or keep()) | dry run added to the guarded call | the dry run's "
        "cost (added, minus a second execution where the call ran twice) | cost / execution | "
        + ("cost / BFCL's executor | " if executor else "")
        + "calls where fork() + discard() is cheaper |",
        "|---|---|---|" + ("---|---|" if executor else "") + "---|---|---|---|---|",
    ]
    for backend, c in cost.items():
        overhead = fork_overhead(c)
        ratio = round(overhead / c["exec_us"], 2) if overhead and c["exec_us"] else None
        cells = [backend, str(c["calls"]), f"{c['exec_us']} us"]
        if executor:
            cells.append(f"{c.get('executor_us')} us")
        cells += [f"{c['fork_us']} us", f"{c['dry_run_added_us']} us", f"{overhead} us"]
        cells.append(f"{ratio}x")
        if executor:
            ex = c.get("executor_us")
            cells.append(f"{round(overhead / ex, 2)}x" if overhead and ex else "-")
        cells.append(f"{c['calls_fork_cheaper']}/{c['calls']}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def targets(
    summary: dict[str, Any],
    cost: dict[str, dict[str, Any]],
    classify: Callable[[dict[str, Any]], tuple[str, str]] | None = None,
) -> list[str]:
    """The issue's three targets for fork dry-run alone (configuration ``fork``)."""
    s = summary.get("fork")
    if s is None:
        return ["(configuration fork not run: no target checked)"]
    gt, mu = s["ground_truth"], s["mutations"]
    rejections = gt["env_rejections"] + mu["env_rejections"]
    caught = gt["caught_before_execution"] + mu["caught_before_execution"]
    missed_real = gt["dry_run_passed_real_rejected"] + mu["dry_run_passed_real_rejected"]
    dry_runs = gt["dry_runs"] + mu["dry_runs"]
    agree = gt["dry_run_agrees"] + mu["dry_run_agrees"]
    overall = cost.get("all") or {}
    once = bool(overall.get("transactional"))
    agreement = (
        f"the dry run is the execution itself (one run, kept in log mode), so its verdict is "
        f"the real execution's on all {agree}/{dry_runs} calls by construction; what keeps "
        f"the replay honest is the raw oracle, a separate replay that rejected exactly these calls"
        if once
        else f"the dry run's verdict equals the real execution's on the same state for "
        f"{agree}/{dry_runs} calls, {missed_real} passed on the fork but rejected for real"
    )
    lines = [
        f"- Blocks before execution every environment rejection: "
        f"**{'met' if caught == rejections and not missed_real else 'missed'}** "
        f"({caught}/{rejections} calls the raw replay rejects, ground truth and mutations; "
        f"{agreement})."
    ]
    copy = summary.get("fork_copy")
    if copy is not None:
        cg, cm = copy["ground_truth"], copy["mutations"]
        lines.append(
            f"  - with a copying fork instead ({copy['label']}), where the dry run is a run of "
            f"its own followed by the real one: "
            f"{cg['caught_before_execution'] + cm['caught_before_execution']}/"
            f"{cg['env_rejections'] + cm['env_rejections']} caught, and the dry run's verdict "
            f"equals the real execution's on {cg['dry_run_agrees'] + cm['dry_run_agrees']}/"
            f"{cg['dry_runs'] + cm['dry_runs']} calls."
        )
    alone = gt["rejected_by_dry_run"] + mu["rejected_by_dry_run"]
    rest: Counter[str] = Counter(gt["not_dry_run"]) + Counter(mu["not_dry_run"])
    lines.append(
        f"  - the dry run's own verdict rejects {alone}/{rejections}; the others, by the check "
        f"that stopped them: {', '.join(f'{k} {n}' for k, n in rest.most_common()) or 'none'}."
    )
    for m in s["misses"][:10]:
        lines.append(f"  - missed: {m['task']} {m['method']} step {m['step']} `{m['tool']}` "
                     f"({m['backend']})")  # fmt: skip
    added = [f for f in s["false_positive_list"] if f["check"] == DRY_RUN_CHECK]
    others = [f for f in s["false_positive_list"] if f["check"] != DRY_RUN_CHECK]
    wrong = gt["dry_run_rejected_real_accepted"] + mu["dry_run_rejected_real_accepted"]
    lines.append(
        f"- Adds no flag on a ground-truth call the environment accepts: "
        f"**{'met' if not added and not wrong else 'missed'}** ({len(added)} dry-run flags on "
        f"accepted ground-truth calls; {wrong} calls anywhere rejected on the fork and accepted "
        f"by the real execution. The configuration's schema and dependency checks flag "
        f"{len(others)} accepted ground-truth calls, as (a) does)."
    )
    for f in added[:10]:
        why = ": {}, {}".format(*classify({**f, "env_rejected": False})) if classify else ""
        lines.append(f"  - {f['task']} step {f['step']} `{f['tool']}` {f['check']}{why}")
    if overall and overall["exec_us"] is not None and overall["dry_run_added_us"] is not None:
        lines += _cost_target(cost, overall)
    return lines


def _cost_target(cost: dict[str, dict[str, Any]], overall: dict[str, Any]) -> list[str]:
    exec_us, fork_us = overall["exec_us"], overall["fork_us"]
    extra = fork_overhead(overall)
    how = (
        f"the call runs once, inside the transaction, so the dry run costs all it adds: "
        f"{extra} us; its fork() + keep() alone {fork_us} us"
        if overall.get("transactional")
        else f"the dry run adds {overall['dry_run_added_us']} us to the guarded call, so the "
        f"fork costs {extra} us beyond running the call once more; its fork() + discard() "
        f"alone {fork_us} us"
    )
    worse = [k for k, c in cost.items() if k != "all" and (fork_overhead(c) or 0) >= c["exec_us"]]
    met = extra is not None and extra < exec_us
    lines = [
        f"- Costs less per call than the environment's own execution: "
        f"**{'met' if met else 'missed'}** against the call's own execution (medians over "
        f"{overall['calls']} calls: execution {exec_us} us; {how}). Costlier than that "
        f"execution on: {', '.join(worse) or 'none'}."
    ]
    executor_us = overall.get("executor_us")
    if executor_us is not None:
        slower = [
            k
            for k, c in cost.items()
            if k != "all" and (fork_overhead(c) or 0) >= (c.get("executor_us") or 0)
        ]
        lines.append(
            f"  - against BFCL's own executor of the call (its `execute_multi_turn_func_call`: "
            f"the call string evaluated, the answer rendered), {executor_us} us: "
            f"**{'met' if extra is not None and extra < executor_us else 'missed'}** "
            f"({round(extra / executor_us, 2) if extra else '-'}x). Costlier than the executor "
            f"on: {', '.join(slower) or 'none'}."
        )
    return lines
