"""``python -m benchmarks.tau2.run``: the tau2 harness end to end.

Replays every ground-truth task of airline and retail on the raw environment (oracle) and
through the guard (spans to ``OUT/spans-*.jsonl``), injects seeded wrong ids, writes
``records.jsonl``, ``summary.md`` and ``report.json`` (``toolguard report`` over the spans).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.tau2._tau2 import DOMAINS, tau2_import_error

_PROVIDER: Any = None


def _init_worker(out: str) -> None:
    # One span file per worker process: the OTLP file exporter is not shared across forks.
    global _PROVIDER
    import toolguard as tg

    _PROVIDER = tg.setup_file_export(os.path.join(out, f"spans-{os.getpid()}.jsonl"))


def _work(job: tuple[Any, int, str, bool]) -> list[dict[str, Any]]:
    from benchmarks.tau2.experiment import run_task

    records = run_task(*job)
    # Pool workers leave through os._exit, skipping atexit: flush after every task.
    if _PROVIDER is not None:
        _PROVIDER.force_flush()
    return records


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/tau2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="tasks per domain (default: all)")
    ap.add_argument("--domains", default=",".join(DOMAINS))
    ap.add_argument("--context", choices=("account", "none"), default="account")
    ap.add_argument(
        "--no-strict", action="store_true", help="skip the context=none ground-truth replay"
    )
    args = ap.parse_args(argv)
    problem = tau2_import_error()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    from benchmarks.tau2.summary import write_summary
    from benchmarks.tau2.tasks import load_tasks

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("spans-*.jsonl"):
        old.unlink()  # a previous run's spans would be counted twice
    tasks = [t for d in args.domains.split(",") for t in load_tasks(d, args.limit)]
    jobs = [(t, args.seed, args.context, not args.no_strict) for t in tasks]
    started = time.monotonic()
    with ProcessPoolExecutor(args.jobs, initializer=_init_worker, initargs=(str(out),)) as ex:
        records = [r for rs in ex.map(_work, jobs, chunksize=1) for r in rs]
    elapsed = time.monotonic() - started
    with open(out / "records.jsonl", "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolguard",
            "report",
            *map(str, sorted(out.glob("spans-*.jsonl"))),
            "--by",
            "domain,variant,context",
            "--format",
            "json",
            "--quiet",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (out / "report.json").write_text(report)
    text = write_summary(records, json.loads(report), out / "summary.md", elapsed, argv)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
