"""``python -m benchmarks.infer [--limit N] [--out out/infer]``: an inferred contract against
the hand rules on BFCL multi-turn, out of sample.

The harness's result files (``benchmarks.bfcl``'s ``write_mutants``): the ground truth and
one file per mutation class. Tasks split by their index in their category: the ground truth
of the even ones is what ``toolguard infer`` reads; the mutants of the odd ones are replayed
(BFCL's live backends, log mode, so every call runs and the cohorts share the state) under
schema-only (the run's own schemas), the inferred contract and the hand rules
(``python -m benchmarks.bfcl contract``). Per mutation class: the environment's rejections,
those each contract flagged before execution (schema, dependency, precondition,
information), and its flags on calls the environment accepted. Writes ``infer.json`` and
``infer.md``; prints the table.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

import toolguard as tg
from benchmarks.bfcl import CATEGORIES
from benchmarks.bfcl.__main__ import write_mutants
from benchmarks.bfcl.contract import write_contract
from benchmarks.bfcl.data import load_tasks
from benchmarks.bfcl.mutations import MUTATION_CLASSES, mutate
from benchmarks.infer.cost import markdown as cost_markdown
from benchmarks.infer.cost import measure_cost
from toolguard.infer import CommonRule, propose, render, trace_runs
from toolguard.replay.engine import DRY_RUN, ENVIRONMENT, WITH_CONTRACT, Replayer
from toolguard.replay.model import RecordedRun
from toolguard.replay.sources import read_runs

PRE_EXECUTION = frozenset({"schema", "dependency", "precondition", "information"})
DRY_RUN_CHECK = "state.dry_run"  # the fork's rejection, found before the real execution
NAMES = ("schema-only", "inferred", "hand rules", "dry run", "inferred + dry run")
# Mutation classes whose error is a wrong or invented id (the dependency type).
DEPENDENCY_TYPE = ("wrong_id", "dropped_prerequisite")


def _runs(files: Sequence[Path], keep: set[str]) -> Iterator[RecordedRun]:
    for run in read_runs("bfcl", files):
        if run.task in keep:
            yield run


def _steps(traj: tg.Trajectory) -> dict[int, tg.Verdict]:
    return {v.step: v for v in traj.verdicts if v.step is not None}


def _flagged(verdict: tg.Verdict | None) -> bool:
    """Flagged before execution: a check before the run, or the fork dry run's rejection
    (in log mode the dry run is tried even after a logged failure: it is among the failed
    checks then)."""
    if verdict is None:
        return False
    return verdict.cause in PRE_EXECUTION or DRY_RUN_CHECK in verdict.failed_checks


def measure(
    limit: int | None,
    out: Path,
    seed: int,
    min_support: int = 5,
    min_share: float = 0.95,
    dev: bool = False,
    min_distinct: int = 5,
    named_ids: bool = True,
    initial_state: bool = True,
    typed_quantities: bool = True,
    first_uses: bool = True,
    creator_names: bool = True,
    place_closure: bool = True,
    swap: bool = False,
) -> dict[str, Any]:
    """``dev``: the tuning split. Only the tasks inference may read (the even ones) are used,
    split again the same way, so a change is judged without reading the held-out tasks.
    ``swap`` (with ``dev``): its halves swapped, a second tuning split on the same tasks."""
    t0 = time.monotonic()
    tasks = load_tasks(CATEGORIES, limit)
    if dev:
        kept: dict[str, list[str]] = {}
        for t in tasks:
            kept.setdefault(t.category, []).append(t.id)
        even = {i for ids in kept.values() for i in ids[0::2]}
        tasks = [t for t in tasks if t.id in even]
    by_category: dict[str, list[str]] = {}
    for t in tasks:
        by_category.setdefault(t.category, []).append(t.id)
    train = {i for ids in by_category.values() for i in ids[0::2]}
    test = {i for ids in by_category.values() for i in ids[1::2]}
    if dev and swap:
        train, test = test, train
    files = write_mutants(tasks, out / "results", seed)
    # The mutated step of each (task, class): an accepted call flagged there is the mutation
    # itself, which the environment let through (an invented value), not a false flag.
    changed: dict[tuple[str | None, str], int] = {}
    for t in tasks:
        for kind in MUTATION_CLASSES:
            m = mutate(t, kind, seed)
            if m is not None:
                changed[(t.id, kind)] = m.position
    truth = [f for f in files if f.parts[-3] == "ground-truth"]
    rule = CommonRule(named_ids=named_ids)
    flow = trace_runs(_runs(truth, train), rule=rule, initial_state=initial_state)
    flow.warn_empty()
    proposals = propose(
        flow,
        min_support=min_support,
        min_share=min_share,
        min_distinct=min_distinct,
        typed_quantities=typed_quantities,
        first_uses=first_uses,
        creator_names=creator_names,
        place_closure=place_closure,
    )
    inferred_path = out / "inferred.toml"
    inferred_path.write_text(
        render(
            proposals,
            flow,
            min_support=min_support,
            min_share=min_share,
            min_distinct=min_distinct,
        )
    )
    hand_path = out / "hand.toml"
    write_contract(hand_path)
    contracts = {
        "schema-only": tg.Contract(path="(the run's own schemas)", mode="log"),
        "inferred": tg.load_contract(inferred_path),
        "hand rules": tg.load_contract(hand_path),
    }
    provider = TracerProvider()
    env = Replayer(provider)
    guarded = {
        name: (Replayer(provider, contract=c), WITH_CONTRACT) for name, c in contracts.items()
    }
    # The fork dry run alone (the run's own schemas), and after the inferred contract's checks.
    guarded["dry run"] = (Replayer(provider, dry_run=True), DRY_RUN)
    guarded["inferred + dry run"] = (
        Replayer(provider, dry_run=True, dry_run_contract=contracts["inferred"]),
        DRY_RUN,
    )
    rows: dict[str, dict[str, Any]] = {}
    for f in files:
        model = f.parts[-3]
        if model == "ground-truth":
            continue
        row = rows.setdefault(
            model.removeprefix("mutant-"),
            {"runs": 0, "calls": 0, "rejected": 0, "accepted": 0, "caught": {}, "flags": {},
             "flags_at_mutation": {}, "both": 0, "missed": {}},
        )  # fmt: skip
        for run in _runs([f], test):
            row["runs"] += 1
            truth_steps = _steps(env.replay(run, ENVIRONMENT))
            seen = {n: _steps(r.replay(run, cohort)) for n, (r, cohort) in guarded.items()}
            for step, verdict in truth_steps.items():
                row["calls"] += 1
                row["rejected" if not verdict.ok else "accepted"] += 1
                pre = {n: _flagged(s.get(step)) for n, s in seen.items()}
                key = "caught" if not verdict.ok else "flags"
                if verdict.ok and changed.get((run.task, model[7:])) == step:
                    key = "flags_at_mutation"
                for n, hit in pre.items():
                    row[key][n] = row[key].get(n, 0) + hit
                if not verdict.ok and pre["inferred"] and pre["hand rules"]:
                    row["both"] += 1
                elif not verdict.ok and pre["hand rules"]:
                    # What inference misses, by the rejected call's tool and the hand check.
                    hand = seen["hand rules"][step]
                    where = f"{hand.tool}:{hand.check}"
                    row["missed"][where] = row["missed"].get(where, 0) + 1
    # Out-of-sample false positives proper: the held-out tasks' ground truth never failed.
    held_out: dict[str, Any] = {"runs": 0, "accepted": 0, "flags": {}, "by_check": {}}
    for run in _runs(truth, test):
        held_out["runs"] += 1
        truth_steps = _steps(env.replay(run, ENVIRONMENT))
        for name, (replayer, cohort) in guarded.items():
            for step, verdict in _steps(replayer.replay(run, cohort)).items():
                base = truth_steps.get(step)
                if base is None or not base.ok:
                    continue
                if name == "schema-only":
                    held_out["accepted"] += 1
                if _flagged(verdict):
                    held_out["flags"][name] = held_out["flags"].get(name, 0) + 1
                    if name == "inferred":
                        check = f"{verdict.tool}:{verdict.check}"
                        held_out["by_check"][check] = held_out["by_check"].get(check, 0) + 1
    rules = {w: sum(p.what == w for p in proposals) for w in ("refs", "grounded", "invalidates")}
    return {
        "split": (
            ("dev, halves swapped" if swap else "dev (the even tasks only, split again)")
            if dev
            else "even / odd"
        ),
        "tasks": len(tasks),
        "min_support": min_support,
        "min_share": min_share,
        "min_distinct": min_distinct,
        "named_ids": named_ids,
        "initial_state": initial_state,
        "typed_quantities": typed_quantities,
        "first_uses": first_uses,
        "creator_names": creator_names,
        "place_closure": place_closure,
        "initial_places": len(contracts["inferred"].initial),
        "train_tasks": len(train),
        "test_tasks": len(test),
        "inferred_rules": rules,
        "warnings": flow.warnings,
        "rows": rows,
        "held_out_ground_truth": held_out,
        "seconds": round(time.monotonic() - t0, 1),
    }


def markdown(summary: dict[str, Any]) -> str:
    names = NAMES
    lines = [
        f"BFCL multi-turn, {summary['tasks']} tasks ({summary['split']} split): inferred from "
        "the ground truth of "
        f"{summary['train_tasks']}, replayed on the mutants of the other {summary['test_tasks']} "
        f"(inferred rules: {summary['inferred_rules']}, "
        f"{summary.get('initial_places', 0)} [initial] places; "
        f"min-support {summary['min_support']}, "
        f"min-distinct {summary['min_distinct']}, min-share {summary['min_share']:g}).",
        "",
        "| mutation | calls | env rejections | caught: " + " / ".join(names)
        + " | accepted mutated calls flagged | flags on other accepted calls |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    total: dict[str, Any] = {
        "calls": 0, "rejected": 0, "accepted": 0, "caught": {}, "flags": {},
        "flags_at_mutation": {},
    }  # fmt: skip
    for kind, row in sorted(summary["rows"].items()):
        for k in ("calls", "rejected", "accepted"):
            total[k] += row[k]
        for k in ("caught", "flags", "flags_at_mutation"):
            for n in names:
                total[k][n] = total[k].get(n, 0) + row[k].get(n, 0)
        lines.append(_row(kind, row, names))
    lines.append(_row("all", total, names))
    dep = [summary["rows"][k] for k in DEPENDENCY_TYPE if k in summary["rows"]]
    hand = sum(r["caught"].get("hand rules", 0) for r in dep)
    both = sum(r["both"] for r in dep)
    inferred = sum(r["caught"].get("inferred", 0) for r in dep)
    flags = total["flags"].get("inferred", 0)
    lines += [
        "",
        f"Dependency-type mutants ({', '.join(DEPENDENCY_TYPE)}): the hand rules catch {hand} "
        f"rejections, the inferred contract {inferred}, {both} of the hand rules' "
        f"({both / hand:.1%})."
        if hand
        else "Dependency-type mutants: no hand-rule catch.",
        f"Inferred flags on accepted calls other than the mutated one: {flags}/"
        f"{total['accepted']} ({flags / max(total['accepted'], 1):.2%}); hand rules "
        f"{total['flags'].get('hand rules', 0)}.",
        _held_out(summary["held_out_ground_truth"], names),
        _dry_run_target(summary["held_out_ground_truth"], total),
        "Inferred flags on the held-out ground truth by check: "
        + _top(summary["held_out_ground_truth"]["by_check"]),
        "Dependency-type rejections the hand rules catch and inference misses, by check: "
        + _top(_sum(r["missed"] for r in dep)),
        f"({summary['seconds']} s)",
    ]
    return "\n".join(lines) + "\n"


def _sum(counts: Iterator[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def _top(counts: dict[str, int], n: int = 12) -> str:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{k} {v}" for k, v in ranked[:n]) or "none"


def _held_out(h: dict[str, Any], names: Sequence[str]) -> str:
    flags = ", ".join(
        f"{n} {h['flags'].get(n, 0)} ({h['flags'].get(n, 0) / max(h['accepted'], 1):.2%})"
        for n in names
    )
    return (
        f"Held-out ground truth ({h['runs']} runs that never failed, {h['accepted']} calls): "
        f"flags {flags}."
    )


def _dry_run_target(h: dict[str, Any], total: dict[str, Any]) -> str:
    """The issue's target: inferred + dry run flags no more than the dry run alone + 0.2%."""
    parts = []
    for what, flags, calls in (
        ("held-out ground truth", h["flags"], h["accepted"]),
        ("other accepted mutant calls", total["flags"], total["accepted"]),
    ):
        alone = flags.get("dry run", 0) / max(calls, 1)
        both = flags.get("inferred + dry run", 0) / max(calls, 1)
        parts.append(f"{what} {both:.2%} vs {alone:.2%} ({(both - alone) * 100:+.2f} points)")
    return "Inferred + dry run against the dry run alone (target: at most +0.20 points): " + (
        "; ".join(parts) + "."
    )


def _row(kind: str, row: dict[str, Any], names: Sequence[str]) -> str:
    caught = " / ".join(str(row["caught"].get(n, 0)) for n in names)
    flags = " / ".join(str(row["flags"].get(n, 0)) for n in names)
    at = " / ".join(str(row["flags_at_mutation"].get(n, 0)) for n in names)
    return f"| {kind} | {row['calls']} | {row['rejected']} | {caught} | {at} | {flags} |"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.infer", description=__doc__)
    p.add_argument("--limit", type=int, default=None, help="first N tasks per category")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-support", type=int, default=5)
    p.add_argument("--min-share", type=float, default=0.95)
    p.add_argument("--min-distinct", type=int, default=5)
    p.add_argument(
        "--cost",
        type=int,
        default=0,
        metavar="N",
        help="also time `toolguard infer` on N synthetic trajectories and the tau2 "
        "simulations of --tau2 (benchmarks/infer/cost.py)",
    )
    p.add_argument("--tau2", default="out/tau2-record", help="recorded tau2 simulations")
    p.add_argument("--out", default="out/infer")
    p.add_argument(
        "--dev",
        action="store_true",
        help="the tuning split: the even tasks only, split again (the odd ones never read)",
    )
    p.add_argument(
        "--dev-swap",
        action="store_true",
        help="with --dev: infer from its replayed half and replay its training half",
    )
    p.add_argument(
        "--no-named-ids",
        action="store_true",
        help="small integers are never evidence, even as ids a result named (the before)",
    )
    p.add_argument(
        "--no-initial-state",
        action="store_true",
        help="values of the task's initial_config are no source (the before of [initial])",
    )
    p.add_argument(
        "--refs-typed-quantities",
        action="store_true",
        help="refs also on a quantity the user types (a price with cents; the before)",
    )
    p.add_argument(
        "--grounded-reuses",
        action="store_true",
        help="grounded evidence also from values an earlier call already used (the before)",
    )
    p.add_argument(
        "--grounded-creator-names",
        action="store_true",
        help="grounded also on the name of what a call creates (touch's file; the before)",
    )
    p.add_argument(
        "--no-place-closure",
        action="store_true",
        help="no place joins a kind by holding only its values (the before)",
    )
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = measure(
        args.limit,
        out,
        args.seed,
        args.min_support,
        args.min_share,
        args.dev,
        args.min_distinct,
        named_ids=not args.no_named_ids,
        initial_state=not args.no_initial_state,
        typed_quantities=not args.refs_typed_quantities,
        first_uses=not args.grounded_reuses,
        creator_names=not args.grounded_creator_names,
        place_closure=not args.no_place_closure,
        swap=args.dev_swap,
    )
    (out / "infer.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    text = markdown(summary)
    (out / "infer.md").write_text(text)
    print(text, end="")
    if args.cost > 0:
        tau2 = Path(args.tau2)
        rows = measure_cost(args.cost, out / "cost", tau2 if tau2.is_dir() else None)
        cost = cost_markdown(rows)
        (out / "cost.md").write_text(cost)
        print("\nCost of `toolguard infer` (a fresh process each):\n\n" + cost, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
