"""``python -m benchmarks.infer.cost [--n 10000] [--tau2 DIR]``: what ``toolguard infer`` costs.

Each measurement runs the command itself (``toolguard infer FILE --out ...``) in a fresh
Python process, which reports its own wall time and peak resident memory (``ru_maxrss``);
the same process importing the package and inferring from nothing is the baseline, so the
growth is inference's. Synthetic runs (``synthetic.py``) at 1,000 and ``--n`` trajectories
show how time and memory grow with the input; tau2 simulations recorded by
``python -m benchmarks.tau2.record`` (tau2's own environment answering the ground truth's
calls) are measured where the folder exists.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.infer.synthetic import write_synthetic

_PROBE = """
import json, resource, sys, time
t0 = time.perf_counter()
from toolguard.__main__ import main
code = main(sys.argv[1:])
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
print(json.dumps({"code": code, "seconds": seconds, "peak_mib": peak / 1024}))
"""


def _probe(args: Sequence[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=False
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"toolguard {' '.join(args)} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    rules = [ln for ln in done.stderr.splitlines() if ln.startswith("inferred ")]
    result["said"] = rules[-1] if rules else ""
    return result


def measure_cost(n: int, out: Path, tau2: Path | None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    empty = out / "empty.jsonl"
    empty.write_text("")
    baseline = ["infer", str(empty), "--out", str(out / "e.toml")]
    _probe(baseline)  # the first process pays for a cold file cache: not counted
    rows: dict[str, Any] = {"baseline (no run)": _probe(baseline)}
    for size in sorted({min(1000, n), n}):
        path = out / f"synthetic-{size}.jsonl"
        calls = write_synthetic(path, size)
        row = _probe(["infer", str(path), "--out", str(out / f"synthetic-{size}.toml")])
        row.update(trajectories=size, calls=calls, megabytes=path.stat().st_size / 2**20)
        rows[f"synthetic {size:,}"] = row
    if tau2 is not None:
        files = sorted(tau2.glob("*.json"))
        for f in files:
            contract = out / f"tau2-{f.stem}.toml"
            row = _probe(["infer", str(f), "--format", "tau2", "--out", str(contract)])
            header = contract.read_text().splitlines()[0]
            found = re.search(r"from (\d+) trajectories \((\d+) accepted", header)
            row.update(megabytes=f.stat().st_size / 2**20)
            if found:
                row.update(trajectories=int(found[1]), calls=f"{found[2]} accepted")
            rows[f"tau2 {f.stem}"] = row
    return rows


def markdown(rows: dict[str, Any]) -> str:
    lines = [
        "| input | trajectories | calls | MB | seconds | peak RSS MiB | rules |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r.get('trajectories', '-')} | {r.get('calls', '-')} | "
            f"{r.get('megabytes', 0):.1f} | {r['seconds']:.1f} | {r['peak_mib']:.0f} | "
            f"{r['said'].split(' from ')[0].removeprefix('inferred ')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.infer.cost", description=__doc__)
    p.add_argument("--n", type=int, default=10_000, help="synthetic trajectories")
    p.add_argument("--out", default="out/infer-cost")
    p.add_argument("--tau2", default="out/tau2-record", help="recorded tau2 simulations")
    args = p.parse_args(argv)
    tau2 = Path(args.tau2)
    rows = measure_cost(args.n, Path(args.out), tau2 if tau2.is_dir() else None)
    text = markdown(rows)
    if not tau2.is_dir():
        text += (
            f"\n(no tau2 simulations at {tau2}: `python -m benchmarks.tau2.record` makes them)\n"
        )
    (Path(args.out) / "cost.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
