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
from typing import Any

DRY_RUN_CHECK = "state.dry_run"  # the check id of a rejection found on the fork


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
    """What the fork costs beyond a second execution of the call: the dry run's added time
    minus the execution's (a copy on read pays its copies inside the call, not in fork())."""
    if c.get("dry_run_added_us") is None or c.get("exec_us") is None:
        return None
    return round(c["dry_run_added_us"] - c["exec_us"], 1)


def cost_table(cost: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| backend | calls | environment's execution | fork() + discard() | dry run added to "
        "the guarded call | fork cost beyond re-running the call | fork() + discard() / "
        "execution | calls where fork() + discard() is cheaper |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for backend, c in cost.items():
        overhead = fork_overhead(c)
        lines.append(
            f"| {backend} | {c['calls']} | {c['exec_us']} us | {c['fork_us']} us | "
            f"{c['dry_run_added_us']} us | {overhead} us | {c['fork_over_exec']}x | "
            f"{c['calls_fork_cheaper']}/{c['calls']} |"
        )
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
    lines = [
        f"- Blocks before execution every environment rejection: "
        f"**{'met' if caught == rejections and not missed_real else 'missed'}** "
        f"({caught}/{rejections} calls the raw replay rejects, ground truth and mutations; "
        f"the dry run's verdict equals the real execution's on the same state for "
        f"{agree}/{dry_runs} calls, {missed_real} passed on the fork but rejected for real)."
    ]
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
    overall = cost.get("all")
    if overall and overall["exec_us"] is not None and overall["dry_run_added_us"] is not None:
        exec_us, fork_us = overall["exec_us"], overall["fork_us"]
        extra = fork_overhead(overall)
        worse = [
            k for k, c in cost.items() if k != "all" and (fork_overhead(c) or 0) >= c["exec_us"]
        ]
        lines.append(
            f"- Costs less per call than the environment's own execution: "
            f"**{'met' if extra is not None and extra < exec_us else 'missed'}** (medians over "
            f"{overall['calls']} calls: execution {exec_us} us; the dry run adds "
            f"{overall['dry_run_added_us']} us to the guarded call, so the fork costs {extra} us "
            f"beyond running the call once more; its fork() + discard() alone {fork_us} us). "
            f"Costlier than the execution on: {', '.join(worse) or 'none'}."
        )
    return lines
