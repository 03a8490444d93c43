"""Run the demo end to end: guarded episodes -> OTLP JSON Lines file -> report.

python -m toolguard.demo --out out/demo-spans.jsonl
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import toolguard as tg

from .agents import POLICIES, Task, as_model_call
from .app import Phone, build_tools

_PEOPLE = [
    ("Alice", "+1-555-0199"),
    ("Bob", "+1-555-0142"),
    ("Carol", "+1-555-0177"),
    ("Dan", "+1-555-0123"),
    ("Erin", "+1-555-0168"),
]


def run_episode(index: int, policy: str, task: Task, *, cellular: bool) -> tg.Trajectory:
    phone = Phone(
        [p for p in _PEOPLE if task.kind != "add" or p[0] != task.name], cellular=cellular
    )
    guard = tg.Guard(state=phone)
    build_tools(phone, guard)
    labels = {
        "model": "scripted",
        "method": policy,
        "dataset": "demo",
        "task": f"{task.kind}:{task.name}",
    }
    with guard.trajectory(f"demo-{index:03d}", labels=labels, user_input=task.user_input) as traj:
        POLICIES[policy](as_model_call(guard), task)
        traj.success = _achieved(phone, task)
    return traj


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
        f"{'first cause':<18} success"
    )
    for i in range(args.episodes):
        policy = policies[i % len(policies)]
        name, number = rng.choice(_PEOPLE)
        task = Task(rng.choice(["remove", "message", "add"]), name, number)
        traj = run_episode(i, policy, task, cellular=policy != "ignores_settings")
        print(
            f"{traj.id:<10} {policy:<17} {task.kind + ':' + name:<16} {traj.length:>2} "
            f"{traj.first_error_depth:>3}  {traj.first_error_cause or '-':<18} {traj.success}"
        )
    provider.force_flush()
    print(f"\nspans written to {out}")
    if args.no_report:
        return 0
    return _report(out)


def _report(out: Path) -> int:
    import importlib.util

    from toolguard._cli import main as cli

    args = ["report", str(out), "--by", "method"]
    plot = out.with_suffix(".pec.png")
    if importlib.util.find_spec("matplotlib") is not None:
        args += ["--plot", str(plot)]
    print()
    code = cli(args)
    if "--plot" in args and code == 0:
        print(f"PEC plot written to {plot}")
    elif "--plot" not in args:
        print("(no PEC plot: pip install 'toolguard-otel[plot]')")
    return code


if __name__ == "__main__":
    sys.exit(main())
