"""``python -m benchmarks.infer.tau2``: an inferred contract against the hand rules on tau2
airline and retail, inferred from half of the simulations and evaluated on the other half.

The tasks of each domain are split by their index (even: inferred from, odd: held out). Each
simulation is tau2's own (``benchmarks.tau2.record.simulation``: the task's ground-truth calls
answered by tau2's environment) and written as a tau2 results file, which ``toolguard infer
--format tau2`` reads for the even tasks. The odd tasks' ground truth and their wrong-id
mutants (``benchmarks.tau2.inject``: one id replaced, every class of the domain) are run on a
fresh tau2 environment through a guard in log mode (every call runs, so the readings share the
state) three times: tau2's own schemas alone; the schemas + the inferred contract (the values
the user gave bound under every kind it refers to, as ``toolguard replay`` binds them); the
schemas + the hand rules of ``benchmarks/tau2/specs.py`` (refs, produces and preconditions on
the live database; bound as that harness binds: the ids in the user's text and what the
omitted account lookups would show, ``context.py``). The environment's verdict is the same
calls on a fresh environment with no guard. Columns as the BFCL table's.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import toolguard as tg
from benchmarks.tau2._tau2 import DOMAINS, _db_json, domain_api, tool_call
from benchmarks.tau2.context import account_bindings
from benchmarks.tau2.guarded import tau2_guard
from benchmarks.tau2.inject import inject, injection_classes
from benchmarks.tau2.record import simulation
from benchmarks.tau2.specs import SPECS, Live, user_ids
from benchmarks.tau2.tasks import GroundTruth, load_tasks
from toolguard.infer import CommonRule, propose, render, trace_runs
from toolguard.replay.given import user_values
from toolguard.replay.sources import read_runs

PRE_EXECUTION = frozenset({"schema", "dependency", "precondition", "information"})
NAMES = ("schema-only", "inferred", "hand rules")
_PRISTINE: dict[str, Any] = {}


def _fresh(domain: str) -> Any:
    """A tau2 environment on a deep copy of the domain's pristine database, validated once
    (what ``fresh_environment`` builds, without validating db.json for every run)."""
    api = domain_api(domain)
    if domain not in _PRISTINE:
        _PRISTINE[domain] = api.db_class.model_validate(_db_json(domain))
    return api.get_environment(db=_PRISTINE[domain].model_copy(deep=True))


def _rejections(task: GroundTruth) -> list[bool]:
    """The environment's verdict on each call, no guard: rejected (tau2's error=True)."""
    env = _fresh(task.domain)
    calls = enumerate(task.calls, start=1)
    return [bool(env.get_response(tool_call(c.name, c.arguments, f"c{i}")).error) for i, c in calls]


def _zero_row() -> dict[str, Any]:
    """One kind's counts before its first run (also the table's total over the mutants)."""
    return {
        "runs": 0,
        "calls": 0,
        "rejected": 0,
        "accepted": 0,
        "caught": {},
        "flags": {},
        "flags_at_mutation": {},
        "both": 0,
    }


def _inferred_specs(contract: tg.Contract) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "refs": dict(s.refs),
            "produces": dict(s.produces),
            "invalidates": dict(s.invalidates),
            "grounded": list(s.grounded),
        }
        for name, s in contract.tools.items()
    }


def _kinds(contract: tg.Contract) -> set[str]:
    return {k for s in contract.tools.values() for k in s.refs.values()}


def _run(
    name: str, guard: tg.Guard, live: Live, task: GroundTruth, kinds: set[str], tid: str
) -> dict[int, str | None]:
    """Step -> the check that failed first among the pre-execution causes the guard logged
    (``dependency.order_id``; None: none)."""
    live.env = _fresh(task.domain)
    with tg.trajectory(id=tid, user_input=task.user_text) as traj:
        if name == "hand rules":
            for kind, value in user_ids(task.domain, task.user_text):
                traj.bind(kind, value, source="user instruction")
            for kind, value in account_bindings(task, live.env, guard):
                traj.bind(kind, value, source="account lookup")
        elif name == "inferred":
            for value in user_values(task.user_text):
                for kind in sorted(kinds):
                    traj.bind(kind, value)
        for i, call in enumerate(task.calls, start=1):
            guard.call(call.name, call.arguments, call_id=f"{tid}-{i}")
    live.env = None
    out: dict[int, str | None] = {}
    for v in traj.verdicts:
        if v.step is not None:
            out[v.step] = (v.check or v.cause) if v.cause in PRE_EXECUTION else None
    return out


def _write(path: Path, sims: list[dict[str, Any]]) -> None:
    info = {"agent_info": {"llm": path.stem}, "environment_info": {"domain_name": "mixed"}}
    path.write_text(json.dumps({"info": info, "tasks": [], "simulations": sims}))


def measure(
    limit: int | None,
    out: Path,
    seed: int = 0,
    min_support: int = 5,
    min_share: float = 0.95,
    min_distinct: int = 5,
) -> dict[str, Any]:
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    train: list[GroundTruth] = []
    test: list[GroundTruth] = []
    for domain in DOMAINS:
        tasks = load_tasks(domain, limit)
        train += tasks[0::2]
        test += tasks[1::2]
    by_id = {d: {str(t.id): t for t in domain_api(d).get_tasks(None)} for d in DOMAINS}
    sims = [simulation(t.domain, by_id[t.domain][t.task_id], t, "ground-truth") for t in train]
    truth = out / "train-ground-truth.json"
    _write(truth, sims)
    flow = trace_runs(read_runs("tau2", [truth]), rule=CommonRule())
    flow.warn_empty()
    proposals = propose(
        flow, min_support=min_support, min_share=min_share, min_distinct=min_distinct
    )
    inferred_path = out / "inferred.toml"
    inferred_path.write_text(
        render(
            proposals, flow, min_support=min_support, min_share=min_share, min_distinct=min_distinct
        )
    )
    contract = tg.load_contract(inferred_path)
    kinds = _kinds(contract)
    guards = {
        d: {
            "schema-only": tau2_guard(d, {}, "log"),
            "inferred": tau2_guard(d, _inferred_specs(contract), "log"),
            "hand rules": tau2_guard(d, SPECS[d], "log"),
        }
        for d in DOMAINS
    }
    rows: dict[str, dict[str, Any]] = {}
    # The held-out ground truth's flags by contract and (tool, check): every one is false.
    false_flags: dict[str, dict[str, int]] = {}
    for task in test:
        variants: list[tuple[str, GroundTruth, int | None]] = [("ground truth", task, None)]
        for cls in injection_classes(task.domain):
            mutated = inject(task, cls, seed)
            if mutated is not None:
                variants.append((f"{task.domain}/{cls}", mutated.task, mutated.step))
        for kind, calls, changed in variants:
            row = rows.setdefault(kind, _zero_row())
            row["runs"] += 1
            env = _rejections(calls)
            tid = f"{task.key}-{kind}"
            seen = {
                n: _run(n, g, live, calls, kinds, tid)
                for n, (g, live) in guards[task.domain].items()
            }
            for step, rejected in enumerate(env, start=1):
                row["calls"] += 1
                row["rejected" if rejected else "accepted"] += 1
                key = "caught" if rejected else "flags"
                if not rejected and step == changed:
                    key = "flags_at_mutation"
                hits = {n: s.get(step) is not None for n, s in seen.items()}
                if kind == "ground truth" and not rejected:
                    for n, s in seen.items():
                        if s.get(step) is not None:
                            what = f"{calls.calls[step - 1].name}: {s[step]}"
                            by = false_flags.setdefault(n, {})
                            by[what] = by.get(what, 0) + 1
                for n, hit in hits.items():
                    row[key][n] = row[key].get(n, 0) + hit
                if rejected and hits["inferred"] and hits["hand rules"]:
                    row["both"] += 1
    return {
        "train_tasks": len(train),
        "test_tasks": len(test),
        "inferred_rules": {
            w: sum(p.what == w for p in proposals) for w in ("refs", "grounded", "invalidates")
        },
        "warnings": flow.warnings,
        "rows": rows,
        "false_flags": {n: dict(sorted(by.items())) for n, by in sorted(false_flags.items())},
        "seconds": round(time.monotonic() - t0, 1),
    }


def markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"tau2 airline + retail: inferred from the ground truth of {summary['train_tasks']} "
        f"tasks (the even ones of each domain), evaluated on the other {summary['test_tasks']} "
        f"(inferred rules: {summary['inferred_rules']}).",
        "",
        "| mutation | calls | env rejections | caught: "
        + " / ".join(NAMES)
        + " | accepted mutated calls flagged | flags on other accepted calls |",
        "|---|---|---|---|---|---|",
    ]
    total = _zero_row()
    for kind, row in sorted(summary["rows"].items()):
        if kind != "ground truth":
            for k in ("calls", "rejected", "accepted", "both"):
                total[k] += row[k]
            for k in ("caught", "flags", "flags_at_mutation"):
                for n in NAMES:
                    total[k][n] = total[k].get(n, 0) + row[k].get(n, 0)
        lines.append(_row(kind, row))
    lines.append(_row("all mutants", total))
    hand = total["caught"].get("hand rules", 0)
    gt = summary["rows"].get("ground truth", {"accepted": 0, "flags": {}})
    lines += [
        "",
        f"Mutant rejections the hand rules catch: {hand}; the inferred contract catches "
        f"{total['caught'].get('inferred', 0)}, {total['both']} of the hand rules' "
        f"({total['both'] / max(hand, 1):.1%}).",
        "Flags on the held-out ground truth (runs that never failed, "
        f"{gt['accepted']} accepted calls): "
        + ", ".join(
            f"{n} {gt['flags'].get(n, 0)} ({gt['flags'].get(n, 0) / max(gt['accepted'], 1):.2%})"
            for n in NAMES
        )
        + f". ({summary['seconds']} s)",
    ]
    for n, by in summary.get("false_flags", {}).items():
        lines.append(f"- {n}'s: " + ", ".join(f"{what} {k}" for what, k in by.items()))
    return "\n".join(lines) + "\n"


def _row(kind: str, row: Mapping[str, Any]) -> str:
    caught = " / ".join(str(row["caught"].get(n, 0)) for n in NAMES)
    flags = " / ".join(str(row["flags"].get(n, 0)) for n in NAMES)
    at = " / ".join(str(row["flags_at_mutation"].get(n, 0)) for n in NAMES)
    return f"| {kind} | {row['calls']} | {row['rejected']} | {caught} | {at} | {flags} |"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.infer.tau2", description=__doc__)
    p.add_argument("--limit", type=int, default=None, help="first N tasks per domain")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-support", type=int, default=5)
    p.add_argument("--min-share", type=float, default=0.95)
    p.add_argument("--min-distinct", type=int, default=5)
    p.add_argument("--out", default="out/infer/tau2")
    args = p.parse_args(argv)
    out = Path(args.out)
    summary = measure(
        args.limit, out, args.seed, args.min_support, args.min_share, args.min_distinct
    )
    (out / "tau2.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    text = markdown(summary)
    (out / "tau2.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
