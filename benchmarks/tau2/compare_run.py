"""``python -m benchmarks.tau2.compare_run``: four guard configurations on tau2 (issue 15).

Replays every airline and retail ground truth and its seeded wrong-id injections under (a)
schema + dependencies, (b) the hand rules, (c) a fork dry-run without hand state rules, (d)
both, and (c') (c) on a copy on read (compare.py); then times the dry run per ground-truth
call (cost.py): the undo on read and the copy on read on every call, ``tg.DeepCopyFork()`` on
the first ``--deep-copy-tasks`` tasks per domain (a deep copy of the airline database takes
about a second); then checks the undo on read undoes and keeps exactly on the first
``--undo-tasks`` tasks per domain (undo.py). Writes ``OUT/compare.md`` and
``OUT/compare.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.tau2._tau2 import DOMAINS, tau2_import_error


def _job(job: tuple[Any, int, tuple[str, ...]]) -> list[dict[str, Any]]:
    from benchmarks.tau2.compare import run_task

    return run_task(*job)


def markdown(
    summary: dict[str, Any],
    costs: dict[str, dict[str, Any]],
    header: list[str],
    undo_lines: list[str] | None = None,
) -> str:
    from benchmarks._compare import class_table, config_table, cost_table, targets

    lines = [*header, "", "## Configurations", "", *config_table(summary), ""]
    lines += ["## Environment rejections caught, by injection class", "", *class_table(summary)]
    names = list(costs)
    for name in names:
        lines += ["", f"## Cost per call with {name} (ground-truth calls, medians)", ""]
        lines += cost_table(costs[name])
    if undo_lines:
        lines += ["", "## Does the undo on read undo exactly? (benchmarks/tau2/undo.py)", ""]
        lines += undo_lines
    lines += ["", f"## Targets (fork dry-run alone, {names[0]})", ""]
    lines += targets(summary, costs[names[0]])
    lines += ["", "## Ground-truth calls flagged before execution", ""]
    flagged = [
        f"- {s['label']}: {f['task']} step {f['step']} `{f['tool']}` {f['check']}"
        for s in summary.values()
        for f in s["false_positive_list"]
    ]
    lines += flagged or ["none, in any configuration"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/tau2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="tasks per domain (default: all)")
    ap.add_argument("--domains", default=",".join(DOMAINS))
    ap.add_argument("--deep-copy-tasks", type=int, default=3, help="per domain, for the cost")
    ap.add_argument("--undo-tasks", type=int, default=2, help="per domain, for undo.py")
    args = ap.parse_args(argv)
    problem = tau2_import_error()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import toolguard as tg
    from benchmarks._compare import summarise
    from benchmarks.tau2 import cost, undo
    from benchmarks.tau2.compare import CONFIGS, lazy_fork
    from benchmarks.tau2.tasks import load_tasks

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    domains = args.domains.split(",")
    tasks = [t for d in domains for t in load_tasks(d, args.limit)]
    jobs = [(t, args.seed, tuple(CONFIGS)) for t in tasks]
    with ProcessPoolExecutor(args.jobs) as ex:
        records = [r for rs in ex.map(_job, jobs, chunksize=2) for r in rs]
    summary = summarise(records, {k: c.label for k, c in CONFIGS.items()})
    deep = [t for d in domains for t in load_tasks(d, args.deep_copy_tasks)]
    costs = {
        "tg.CallbackFork(undo on read)": cost.summarise(cost.measure(tasks)),
        "tg.CallbackFork(copy on read)": cost.summarise(cost.measure(tasks, lazy_fork())),
        f"tg.DeepCopyFork() (first {args.deep_copy_tasks} tasks per domain)": cost.summarise(
            cost.measure(deep, tg.DeepCopyFork())
        ),
    }
    sample = [t for d in domains for t in load_tasks(d, args.undo_tasks)]
    fidelity = undo.check_all(sample, args.seed)
    seconds = round(time.monotonic() - started, 1)
    lazy_ok = all(r["lazy_oracle_agrees"] for r in records)
    header = [
        "# tau2 airline and retail: the guard configurations",
        "",
        f"{len(tasks)} tasks, seed {args.seed}, context account; {seconds} s with "
        f"{args.jobs} worker processes. Ground truth on tau2's own environment and on a "
        f"copy-on-read one: {'identical answers on every call' if lazy_ok else 'DIFFERENT'}.",
    ]
    text = markdown(summary, costs, header, undo.markdown(fidelity, args.undo_tasks))
    (out / "compare.md").write_text(text)
    document = {"summary": summary, "cost": costs, "undo_on_read": fidelity, "seconds": seconds}
    (out / "compare.json").write_text(json.dumps(document, indent=1) + "\n")
    with gzip.open(out / "compare-records.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    print(text)
    print(f"wrote {out}/compare.md, compare.json, compare-records.jsonl.gz in {seconds} s")
    return 0 if lazy_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
