"""Run the demo end to end: guarded episodes -> OTLP JSON Lines file -> report.

Each task is run twice from the same start: by a ReAct-style policy (call, read the answer,
recover) and by the Dual-Loop agent that drafts the same mistake, then verifies and repairs
its plan before executing it. The report groups by method; `toolguard compare` sets the two
loops side by side, with what planning cost.

python -m toolguard.demo --out out/demo-spans.jsonl
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import toolguard as tg

from . import dual_loop
from .agents import POLICIES, Task, as_model_call
from .app import Phone, build_tools

_PEOPLE = [
    ("Alice", "+1-555-0199"),
    ("Bob", "+1-555-0142"),
    ("Carol", "+1-555-0177"),
    ("Dan", "+1-555-0123"),
    ("Erin", "+1-555-0168"),
]


@dataclass
class Episode:
    traj: tg.Trajectory
    seconds: float
    planning: dual_loop.LoopCost | None = None


def run_episode(index: int, policy: str, task: Task, *, cellular: bool, loop: str) -> Episode:
    """One task from a fresh app, by the ReAct policy (``loop="react"``) or by the Dual-Loop
    agent drafting that policy's mistake (``loop="dual"``)."""
    phone = Phone(
        [p for p in _PEOPLE if task.kind != "add" or p[0] != task.name], cellular=cellular
    )
    guard = tg.Guard(state=phone)
    build_tools(phone, guard)
    labels = {
        "model": "scripted",
        "method": policy if loop == "react" else "dual_loop",
        "loop": loop,
        "drafted_as": policy,
        "dataset": "demo",
        "task": f"{task.kind}:{task.name}",
        "episode": f"{index:03d}",
    }
    trajectory_id = f"demo-{index:03d}" if loop == "react" else f"dual-{index:03d}"
    planning = None
    start = time.perf_counter()
    with guard.trajectory(trajectory_id, labels=labels, user_input=task.user_input) as traj:
        if loop == "react":
            POLICIES[policy](as_model_call(guard), task)
        else:
            planning = dual_loop.run(guard, as_model_call(guard), policy, task)
        traj.success = _achieved(phone, task)
    return Episode(traj, time.perf_counter() - start, planning)


def _achieved(phone: Phone, task: Task) -> bool:
    numbers = {c.phone for c in phone.contacts.values()}
    if task.kind == "remove":
        return task.phone not in numbers
    if task.kind == "add":
        return task.phone in numbers
    ids = {c.id for c in phone.contacts.values() if c.name == task.name}
    return any(contact_id in ids for contact_id, _ in phone.messages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolguard.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default="out/demo-spans.jsonl", help="span file to write")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-report", action="store_true", help="stop after writing spans")
    args = parser.parse_args(argv)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)  # the exporter appends; each demo run starts a fresh file
    provider = tg.setup_file_export(out, service_name="toolguard-demo")

    rng = random.Random(args.seed)
    policies = list(POLICIES)
    print(
        f"{'trajectory':<10} {'policy':<17} {'task':<16} {'T':>2} {'FED':>3}  "
        f"{'first cause':<18} {'success':<7}  plan checks"
    )
    episodes: dict[str, list[Episode]] = {"react": [], "dual": []}
    for i in range(args.episodes):
        policy = policies[i % len(policies)]
        name, number = rng.choice(_PEOPLE)
        task = Task(rng.choice(["remove", "message", "add"]), name, number)
        for loop in ("react", "dual"):
            episode = run_episode(i, policy, task, cellular=policy != "ignores_settings", loop=loop)
            episodes[loop].append(episode)
            traj, plan = episode.traj, episode.planning
            checks = "-" if plan is None else f"{plan.verifications} ({plan.steps_verified} steps)"
            print(
                f"{traj.id:<10} {policy:<17} {task.kind + ':' + name:<16} {traj.length:>2} "
                f"{traj.first_error_depth:>3}  {traj.first_error_cause or '-':<18} "
                f"{traj.success!s:<7}  {checks}"
            )
    provider.force_flush()
    if not out.exists():
        # OTEL_TRACES_EXPORTER chose other exporters (setup_file_export honours it): the spans
        # went there, and there is no file to report from here.
        _sent_elsewhere(out)
        return 0
    print(f"\nspans written to {out}")
    if args.no_report:
        return 0
    return _report(out) or _compare(out, episodes)


def _sent_elsewhere(out: Path) -> None:
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "")
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "the OTLP default endpoint"
    )
    print(
        f"\nspans sent to the exporters OTEL_TRACES_EXPORTER={exporters!r} names "
        f"(OTLP endpoint: {endpoint}), not written to {out}: no local report. Report them "
        "from the backend, e.g. for Phoenix:\n"
        "  toolguard report --phoenix http://localhost:6006 --project <project> --by method\n"
        f"or unset OTEL_TRACES_EXPORTER to write {out} and report it here (docs/backends.md)."
    )


def _report(out: Path) -> int:
    import importlib.util

    from toolguard.__main__ import main as toolguard  # the `toolguard` command, as users run it

    args = ["report", str(out), "--by", "method"]
    plot = out.with_suffix(".pec.png")
    if importlib.util.find_spec("matplotlib") is not None:
        args += ["--plot", str(plot)]
    print()
    code = toolguard(args)
    if "--plot" in args and code == 0:
        print(f"PEC plot written to {plot}")
    elif "--plot" not in args:
        print("(no PEC plot: pip install 'toolguard-otel[plot]')")
    if code:
        return code
    # The same report as one page (figures, sortable tables, every trajectory), offline.
    page = out.with_name("demo-report.html")
    if importlib.util.find_spec("plotly") is None:
        print("(no HTML report: pip install 'toolguard-otel[html]')")
        return 0
    page_args = ["report", str(out), "--by", "method", "--format", "html", "--quiet"]
    code = toolguard([*page_args, "--out", str(page)])
    if code == 0:
        print(f"HTML report written to {page} (open it in a browser: {page.resolve().as_uri()})")
    return code


def _compare(out: Path, episodes: dict[str, list[Episode]]) -> int:
    """ReAct against Dual-Loop on the same tasks (paired by episode), with the cost."""
    from toolguard.__main__ import main as toolguard

    print("\nDual-Loop (plan, verify on a copy, repair, execute) against ReAct, same tasks:")
    argv = ["compare", str(out), "--by", "loop", "--a", "react", "--b", "dual"]
    argv += ["--task-label", "episode"]
    print("toolguard " + " ".join(argv))
    code = toolguard(argv)
    if code:
        return code
    records, _ = tg.read_records([str(out)])
    result = tg.compare(records, {"loop": "react"}, {"loop": "dual"}, task_label="episode")
    metrics = result["metrics"]
    print(
        f"\n{'loop':<7} {'N':>3} {'TER':>6} {'AUC-PEC':>8} {'success':>8} "
        f"{'calls run':>10} {'plans checked':>14} {'steps checked':>14} {'ms/episode':>11}"
    )
    sides = {
        loop: {name: metrics[name][side] for name in ("ter", "auc_pec", "final_success")}  # type: ignore[literal-required]
        for loop, side in (("react", "a"), ("dual", "b"))
    }
    for loop, figures in sides.items():
        runs = episodes[loop]
        n = len(runs)
        plans = [e.planning for e in runs if e.planning is not None]
        print(
            f"{loop:<7} {n:>3} {figures['ter']:>6.3f} {figures['auc_pec']:>8.3f} "
            f"{figures['final_success']:>8.3f} "
            f"{sum(e.traj.length for e in runs) / n:>10.2f} "
            f"{sum(p.verifications for p in plans) / n:>14.2f} "
            f"{sum(p.steps_verified for p in plans) / n:>14.2f} "
            f"{1000 * sum(e.seconds for e in runs) / n:>11.2f}"
        )
    print(
        "(per episode: calls run = T, the executed calls; plans checked and steps checked = "
        "the verification's extra work, none of it executed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
