"""``python -m benchmarks.bfcl``: the BFCL multi-turn harness end to end.

    python -m benchmarks.bfcl run [--limit N] [--categories base,...] [--out out/bfcl]
    python -m benchmarks.bfcl results RESULT_FILE... [--out out/bfcl-results]
    python -m benchmarks.bfcl compare [--limit N] [--jobs 2] [--out out/bfcl]
    python -m benchmarks.bfcl score RESULT_FILE... [--out out/bfcl-score]
    python -m benchmarks.bfcl contract [--out out/bfcl-contract.toml]

``run`` replays every ground-truth trajectory and every seeded mutation through the guard
(spans to ``spans.jsonl``), writes the mutated trajectories as BFCL result files and replays
those too (``results-spans.jsonl``), then writes ``report.json`` and ``report.md``.
``results`` replays a user's BFCL result files and prints TER/FED/AUC-PEC/RR per model.
``score`` writes BFCL's own verdicts as BFCL score files (``score.py``), for
``toolguard replay bfcl --bfcl-scores``; ``contract`` writes the hand rules as a contract file
for ``toolguard replay bfcl --contract`` (``contract.py``). ``compare`` runs the four guard
configurations of
``configs.py`` side by side (schema + dependencies, hand rules, fork dry-run, both) and
writes ``compare.md`` / ``compare.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.bfcl import BFCL_EVAL_VERSION, CATEGORIES
from benchmarks.bfcl.data import Call, Task, load_category, load_tasks
from benchmarks.bfcl.evaluate import labels, mutation_table, run_ground_truth, run_mutations
from benchmarks.bfcl.guarded import Harness
from benchmarks.bfcl.mutations import MUTATION_CLASSES, mutate, normalised_calls
from benchmarks.bfcl.oracle import reference, replay
from benchmarks.bfcl.results import (
    RESULT_NAME,
    category_of,
    model_name,
    write_result_file,
)
from toolguard.replay.bfcl import iter_entries


def make_harness(spans: Path) -> tuple[Harness, Any]:
    """An SDK provider of our own (not the global one) writing OTLP JSON Lines to ``spans``."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    spans.parent.mkdir(parents=True, exist_ok=True)
    spans.unlink(missing_ok=True)
    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(FileSpanExporter(str(spans)), max_queue_size=1_000_000)
    )
    return Harness(provider), provider


def toolguard_report(spans: Path, by: str) -> dict[str, Any]:
    """The teammates' aggregator, through its public CLI and JSON contract (docs/protocol.md 5)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolguard",
            "report",
            str(spans),
            "--by",
            by,
            "--format",
            "json",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout)


@dataclass
class Scored:
    """One entry of a user's result file, judged on the raw backends as BFCL's checker does."""

    model: str
    task: Task
    calls: list[tuple[int, Call]]
    success: bool
    inference_error: bool = False


def score_result_files(files: Sequence[Path]) -> Iterator[Scored]:
    """Each multi-turn entry of ``files`` with its verdict. Every replay and every reference
    starts from BFCL's backends as first imported (``Environment`` restores their module
    state), so a file's verdicts do not depend on the files replayed before it. An entry
    whose inference failed (BFCL records the error text instead of turns) is a failure with
    no call, as BFCL scores it."""
    tasks = {t.id: t for c in CATEGORIES for t in load_category(c)}
    for path in files:
        model = model_name(path)
        for entry in iter_entries(path):
            task = tasks.get(entry.id)
            if task is None or category_of(entry.id) not in CATEGORIES:
                continue
            if entry.inference_error is not None:
                yield Scored(model, task, [], False, inference_error=True)
                continue
            calls = [(turn, c) for turn, step in entry.steps for c in step]
            rep = replay(task, calls, reference(task))
            yield Scored(model, task, calls, bool(rep.success))


def replay_result_files(files: Sequence[Path], harness: Harness) -> int:
    """Replay each task of each result file through the guard; Y from the raw replay."""
    n = 0
    for s in score_result_files(files):
        extra = {"model": s.model}
        if s.inference_error:
            extra["inference_error"] = "true"
        harness.run(
            s.task,
            s.calls,
            f"{s.model}/{s.task.id}",
            labels(s.task, "bfcl_result", **extra),
            success=s.success,
        )
        n += 1
    return n


def write_mutants(tasks: list, out: Path, seed: int) -> list[Path]:
    """The ground truth (FC style) and each mutation class (prompting style) as result files."""
    files = []
    for model in ("ground-truth", *(f"mutant-{k}" for k in MUTATION_CLASSES)):
        for category in dict.fromkeys(t.category for t in tasks):
            mine = [t for t in tasks if t.category == category]
            entries = []
            for t in mine:
                if model == "ground-truth":
                    calls = normalised_calls(t)  # FC arguments are keyword-only
                else:
                    m = mutate(t, model.removeprefix("mutant-"), seed)
                    if m is None:
                        continue  # as in the direct run: no mutation of this class fits
                    calls = m.calls
                entries.append((t.id, len(t.questions), calls))
            path = out / model / "multi_turn" / RESULT_NAME.format(category=category)
            write_result_file(path, entries, style="fc" if model == "ground-truth" else "prompting")
            files.append(path)
    return files


def _metric_row(g: dict[str, Any], key: str) -> str:
    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    return (
        f"| {g['labels'].get(key) or '(all)'} | {g['n']} | {f(g['ter'])} | "
        f"{f(g['mean_fed'])} | {f(g['auc_pec'])} | {f(g['final_success'])} | {f(g['rr'])} "
        f"({g['rr_eligible']}) | {f(g['s'])} |"
    )


def markdown(summary: dict[str, Any]) -> str:
    gt = summary["ground_truth"]
    lines = [
        f"# BFCL multi-turn through toolguard (bfcl-eval {BFCL_EVAL_VERSION})",
        "",
        f"Ground truth: {gt['tasks']} tasks, {gt['calls']} calls; environment rejections "
        f"{gt['env_rejections']}; guard flags {gt['flags']}, of which not confirmed by the "
        f"environment (false positives) {gt['false_positives']}.",
        "",
        "| task | step | tool | cause | check | env rejected too |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {f['task']} | {f['step']} | {f['tool']} | {f['cause']} | {f['check']} | "
        f"{f['env_rejected']} |"
        for f in gt["flag_list"]
    ]
    lines += [
        "",
        "## Injected errors",
        "",
        "| mutation | n | guard before execution | env only | silent | harmless | "
        "guard caught, env silent | env rejected | FED agrees | guard earlier | "
        "cause agrees (env) | cause as expected |",
        "|" + "---|" * 12,
    ]
    for r in summary["mutations"]:
        lines.append(
            f"| {r['mutation']} | {r['n']} | {r['guard_before_execution']} | {r['env_only']} | "
            f"{r['silent']} | {r['harmless']} | {r['guard_caught_env_silent']} | "
            f"{r['env_rejected']} | {r['fed_agree']} | {r['guard_earlier']} | "
            f"{r['cause_agree']} | {r['cause_expected']} |"
        )
    for title, key, rep in (
        ("Report by method", "method", summary["report_by_method"]),
        ("BFCL result files, by model", "model", summary["report_results"]),
    ):
        lines += [
            "",
            f"## {title} (toolguard report)",
            "",
            f"| {key} | N | TER | mean FED | AUC-PEC | final success | RR (eligible) | S |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [_metric_row(g, key) for g in rep["groups"]]
    return "\n".join(lines) + "\n"


def cmd_run(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    out = Path(args.out)
    tasks = load_tasks(tuple(args.categories.split(",")), args.limit)
    kinds = tuple(args.mutations.split(","))
    harness, provider = make_harness(out / "spans.jsonl")
    gt = run_ground_truth(tasks, harness)
    outcomes = run_mutations(tasks, harness, kinds, args.seed)
    provider.force_flush()
    provider.shutdown()
    result_files = write_mutants(tasks, out / "results", args.seed)
    r_harness, r_provider = make_harness(out / "results-spans.jsonl")
    replay_result_files(result_files, r_harness)
    r_provider.force_flush()
    r_provider.shutdown()
    summary = {
        "bfcl_eval": BFCL_EVAL_VERSION,
        "seed": args.seed,
        "ground_truth": {
            "tasks": gt.n_tasks,
            "calls": gt.n_calls,
            "env_rejections": gt.env_rejections,
            "flags": len(gt.flags),
            "false_positives": len(gt.false_positives),
            "not_successful": gt.not_successful,
            "flag_list": [vars(f) for f in gt.flags],
        },
        "mutations": mutation_table(outcomes),
        "report_by_method": toolguard_report(out / "spans.jsonl", "method"),
        "report_results": toolguard_report(out / "results-spans.jsonl", "model"),
        "seconds": round(time.monotonic() - t0, 1),
    }
    (out / "report.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "mutations.jsonl").write_text(
        "".join(json.dumps({**vars(o), "verdict": o.verdict}) + "\n" for o in outcomes)
    )
    (out / "report.md").write_text(markdown(summary))
    print((out / "report.md").read_text())
    print(f"wrote {out}/report.json, report.md, spans.jsonl in {summary['seconds']} s")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    out = Path(args.out)
    harness, provider = make_harness(out / "results-spans.jsonl")
    n = replay_result_files([Path(f) for f in args.files], harness)
    provider.force_flush()
    provider.shutdown()
    if n == 0:
        print("no BFCL multi-turn task found in the given files", file=sys.stderr)
        return 1
    report = toolguard_report(out / "results-spans.jsonl", "model")
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print("| model | N | TER | mean FED | AUC-PEC | final success | RR (eligible) | S |")
    print("|---|---|---|---|---|---|---|---|")
    for g in report["groups"]:
        print(_metric_row(g, "model"))
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from benchmarks.bfcl.score import score_files

    for row in score_files([Path(f) for f in args.files], Path(args.out)):
        print(
            f"{row['score']}: accuracy {row['accuracy']:.3f} "
            f"({row['correct_count']}/{row['total_count']})"
        )
    return 0


def cmd_contract(args: argparse.Namespace) -> int:
    from benchmarks.bfcl.contract import write_contract

    n = write_contract(Path(args.out))
    print(f"wrote {args.out}: {n} tools")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from benchmarks._compare import summarise
    from benchmarks.bfcl import compare, compare_report, cost, undo
    from benchmarks.bfcl.configs import CONFIGS
    from benchmarks.bfcl.guarded import fork_strategies

    t0 = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = load_tasks(tuple(args.categories.split(",")), args.limit)
    kinds = tuple(args.mutations.split(","))
    records = compare.run_all(tasks, kinds=kinds, seed=args.seed, jobs=args.jobs)
    summary = summarise(records, {k: c.label for k, c in CONFIGS.items()})
    costs = {
        name: cost.summarise(cost.measure(tasks, fork)) for name, fork in fork_strategies().items()
    }
    fidelity = undo.check_all(tasks, kinds=kinds, seed=args.seed, jobs=args.jobs)
    seconds = round(time.monotonic() - t0, 1)
    header = [
        f"# BFCL multi-turn: the guard configurations (bfcl-eval {BFCL_EVAL_VERSION})",
        "",
        f"{len(tasks)} tasks, seed {args.seed}, mutations: {', '.join(kinds)}; "
        f"{seconds} s with {args.jobs} worker process(es).",
    ]
    text = compare_report.markdown(summary, records, costs, header, fidelity)
    (out / "compare.md").write_text(text)
    document = {"summary": summary, "cost": costs, "undo_log": fidelity, "seconds": seconds}
    (out / "compare.json").write_text(json.dumps(document, indent=1) + "\n")
    with gzip.open(out / "compare-records.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    print(text)
    print(f"wrote {out}/compare.md, compare.json, compare-records.jsonl.gz in {seconds} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bfcl",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="ground truth + mutations + result files, with report")
    run.add_argument("--categories", default=",".join(CATEGORIES))
    run.add_argument("--limit", type=int, default=None, help="first N tasks per category")
    run.add_argument("--mutations", default=",".join(MUTATION_CLASSES))
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", default="out/bfcl")
    res = sub.add_parser("results", help="replay BFCL result files, report per model")
    res.add_argument("files", nargs="+")
    res.add_argument("--out", default="out/bfcl-results")
    sc = sub.add_parser("score", help="BFCL's own checker on result files: BFCL score files")
    sc.add_argument("files", nargs="+")
    sc.add_argument("--out", default="out/bfcl-score")
    ct = sub.add_parser("contract", help="the hand rules as a contract file for toolguard replay")
    ct.add_argument("--out", default="out/bfcl-contract.toml")
    cmp = sub.add_parser("compare", help="four guard configurations side by side")
    cmp.add_argument("--categories", default=",".join(CATEGORIES))
    cmp.add_argument("--limit", type=int, default=None, help="first N tasks per category")
    cmp.add_argument("--mutations", default=",".join(MUTATION_CLASSES))
    cmp.add_argument("--seed", type=int, default=0)
    cmp.add_argument("--jobs", type=int, default=2, help="worker processes")
    cmp.add_argument("--out", default="out/bfcl")
    args = p.parse_args(argv)
    handlers = {
        "run": cmd_run,
        "results": cmd_results,
        "compare": cmd_compare,
        "score": cmd_score,
        "contract": cmd_contract,
    }
    return handlers[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
