"""The one call pipeline against the code it replaced, side by side in one run.

    python -m benchmarks.pipeline_vs_previous [--previous REF] [--rounds N] [--quick]

The previous code (default: the commit before the redesign, ``PREVIOUS``) is checked out in
a temporary git worktree. Two worker processes, one importing ``toolguard`` from that
worktree and one from this checkout, build the same guarded workloads through the public
API both share; the coordinator asks them in turn (one round: every case on both sides, in
a shuffled order) to time ``n`` calls, so both see the same machine at the same moment.
Figures are medians over rounds of the overhead per call (CPU time of the calling thread
minus the bare function's, measured in the same worker), and the ratios new / old (the
previous code's compiled path, which its plain tools took):

- traced (the SDK's provider exporting to the span file, ``tg.setup_file_export``):
  target <= 1.05;
- tracing off: target <= 1.3.

A third worker runs the previous code's general path (``call.py``, which its dry-run and
``tg.State`` tools, log mode and content recording took): new / general, no target.

Beside the times, the bytecodes one call executes beyond the bare function, counted by a
tracing function (``sys.settrace`` with opcode events) on each side: no target, but the same
on every run however loaded the machine, so a change to the pipeline can be judged by it
where the times are noise. It counts Python only: work done in C (pydantic-core, a ``map``
over a list) costs time and no bytecodes.

The existing targets against ``validate_call`` and the lean span are
``python -m benchmarks.overhead``'s (run on this checkout alone).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PREVIOUS = "c897056"  # main before the one pipeline (issue 28): the compiled path and call.py
ROOT = Path(__file__).resolve().parent.parent

# (name, tracing, shape): the workloads of benchmarks/_workload.py, declared the same way
CASES = [
    ("schema only", "off", "schema only"),
    ("workload", "off", "workload"),
    ("workload + produces", "off", "workload + produces"),
    ("search (20 records)", "off", "search"),
    ("by name", "off", "by name"),
    ("blocked", "off", "blocked"),
    ("json_schema", "off", "json_schema"),
    ("async", "off", "async"),
    ("workload", "file", "workload"),
    ("workload + produces", "file", "workload + produces"),
    ("search (20 records)", "file", "search"),
]
TARGETS = {"off": 1.3, "file": 1.05}


# -- the worker: one side, importing toolguard from its tree -----------------------------------


def _worker(tree: str, spans: str, general: bool = False) -> None:
    sys.path.insert(0, tree)
    sys.path.insert(1, str(ROOT))  # benchmarks._workload: this checkout's (the same workloads)
    import asyncio

    from opentelemetry import trace

    import toolguard as tg
    from benchmarks import _workload as w

    assert Path(tg.__file__).resolve().is_relative_to(Path(tree).resolve()), tg.__file__
    off = trace.NoOpTracerProvider()
    file_provider = tg.setup_file_export(spans)
    loop = asyncio.new_event_loop()

    def chunk(call: Any) -> Any:
        def run(k: int) -> None:
            for _ in range(k):
                call()

        return run

    def achunk(afn: Any) -> Any:
        async def many(k: int) -> None:
            for _ in range(k):
                await afn(**w.ARGS)

        return lambda k: loop.run_until_complete(many(k))

    def build(shape: str, provider: Any) -> Any:
        """The case's chunk: ``run(k)`` makes k calls."""
        g = tg.Guard(state=w.Bank(), tracer_provider=provider)
        if general:
            # The previous code's general path (call.py and checks.py), which its dry-run and
            # tg.State tools, log mode and content recording always took.
            g._compiled = False
        if shape == "search":
            fn = g.register(w.search_contacts, **w.search_options())
            return chunk(lambda: fn(**w.SEARCH_ARGS))
        if shape == "json_schema":
            fn = g.register(w.transfer, json_schema=w.TRANSFER_JSON_SCHEMA)
            return chunk(lambda: fn(**w.ARGS))
        if shape == "async":
            return achunk(g.register(w.atransfer, **w.tool_options()))
        if shape == "by name":
            g.register(w.transfer, **w.tool_options())
            text = json.dumps(w.ARGS)
            return chunk(lambda: g.call("transfer", text))
        if shape == "blocked":
            fn = g.register(w.transfer, **w.tool_options())

            def blocked() -> None:
                try:  # noqa: SIM105 - what a caller writes; contextlib.suppress costs more
                    fn(**w.CLOSED_ARGS)
                except tg.ToolCallRejected:
                    pass

            return chunk(blocked)
        fn = g.register(w.transfer, **w.tool_options(shape))
        return chunk(lambda: fn(**w.ARGS))

    built: dict[str, Any] = {
        "bare": (chunk(lambda: w.transfer(**w.ARGS)), None),
        "bare search": (chunk(lambda: w.search_contacts(**w.SEARCH_ARGS)), None),
        "bare async": (achunk(w.atransfer), None),
    }
    for name, tracing, shape in CASES:
        provider = off if tracing == "off" else file_provider
        built[f"{name} | {tracing}"] = (build(shape, provider), provider)

    def run(key: str, n: int) -> float:
        """CPU seconds of this thread for n calls: what the calls cost the agent's thread,
        much less disturbed than wall time by other processes on a shared machine."""
        run_chunk, provider = built[key]
        if provider is file_provider:
            provider.force_flush()  # untimed: the exporter works on this case's spans only
        elapsed = 0.0
        done = 0
        while done < n:  # trajectories of 100 calls, opened and closed untimed
            k = min(100, n - done)
            with tg.trajectory(tracer_provider=provider or off) as traj:
                traj.bind("account_id", w.ACCOUNT)
                traj.bind("account_id", "acc-closed")
                start = time.thread_time()
                run_chunk(k)
                elapsed += time.thread_time() - start
            done += k
        return elapsed

    def count(key: str) -> int:
        """Bytecodes executed by one call (after three), counted by a tracing function:
        the same on every run, whatever else the machine does."""
        run_chunk, provider = built[key]
        executed = [0]

        def opcodes(frame: Any, event: str, arg: Any) -> Any:
            if event == "call":
                frame.f_trace_opcodes = True
            elif event == "opcode":
                executed[0] += 1
            return opcodes

        with tg.trajectory(tracer_provider=provider or off) as traj:
            traj.bind("account_id", w.ACCOUNT)
            traj.bind("account_id", "acc-closed")
            run_chunk(3)
            sys.settrace(opcodes)
            try:
                run_chunk(1)
            finally:
                sys.settrace(None)
        return executed[0]

    for line in sys.stdin:
        key, n = line.rsplit(" ", 1)
        if n.strip() == "count":
            sys.stdout.write(f"{count(key)}\n")
        else:
            sys.stdout.write(f"{run(key, int(n))!r}\n")
        sys.stdout.flush()
    file_provider.shutdown()


# -- the coordinator ------------------------------------------------------------------------


class _Side:
    def __init__(self, label: str, tree: Path, spans: Path, general: bool = False) -> None:
        self.label = label
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(tree), str(spans)]
        self.proc = subprocess.Popen(
            [*command, "--general"] if general else command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(tree),
        )

    def time(self, key: str, n: int) -> float:
        return float(self._ask(f"{key} {n}")) / n

    def count(self, key: str) -> int:
        """The bytecodes one call of ``key`` executes (the worker's ``count``)."""
        return int(self._ask(f"{key} count"))

    def _ask(self, request: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{request}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} worker died (see its output above)")
        return line

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _bare_of(key: str) -> str:
    if key.startswith("search"):
        return "bare search"
    if key.startswith("async"):
        return "bare async"
    return "bare"


def measure(old_tree: Path, rounds: int, n: int, tmp: Path) -> dict[str, Any]:
    sides = {
        "old": _Side("previous", old_tree, tmp / "old.jsonl"),
        "general": _Side("previous, general path", old_tree, tmp / "general.jsonl", True),
        "new": _Side("new", ROOT, tmp / "new.jsonl"),
    }
    keys = ["bare", "bare search", "bare async"] + [f"{c} | {t}" for c, t, _ in CASES]
    samples: dict[tuple[str, str], list[float]] = {(s, k): [] for s in sides for k in keys}
    rng = random.Random(0)
    try:
        for side in sides.values():  # warm-up
            for key in keys:
                side.time(key, max(10, n // 10))
        counts = {(s, k): side.count(k) for s, side in sides.items() for k in keys}
        for _ in range(rounds):
            order = [(s, k) for k in keys for s in sides]
            rng.shuffle(order)
            for s, k in order:
                samples[(s, k)].append(sides[s].time(k, n))
    finally:
        for side in sides.values():
            side.close()
    out: dict[str, Any] = {"cases": {}}
    for name, tracing, _ in CASES:
        key = f"{name} | {tracing}"
        bare = _bare_of(name)
        over = {
            s: statistics.median(samples[(s, key)]) - statistics.median(samples[(s, bare)])
            for s in sides
        }
        per_round = [
            (nw - nb) / (ow - ob)
            for nw, nb, ow, ob in zip(
                samples[("new", key)],
                samples[("new", bare)],
                samples[("old", key)],
                samples[("old", bare)],
                strict=True,
            )
            if ow - ob > 0
        ]
        out["cases"][key] = {
            "old_us": over["old"] * 1e6,
            "general_us": over["general"] * 1e6,
            "new_us": over["new"] * 1e6,
            "ratio": over["new"] / over["old"],
            "ratio_general": over["new"] / over["general"],
            "per_round": statistics.quantiles(per_round, n=4) if len(per_round) > 1 else [],
            "target": TARGETS[tracing],
            # what the call executes beyond the bare function's chunk (the same every run)
            "old_bytecodes": counts[("old", key)] - counts[("old", bare)],
            "new_bytecodes": counts[("new", key)] - counts[("new", bare)],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--worker"]:
        _worker(args[1], args[2], general="--general" in args[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--previous", default=PREVIOUS, help="the git revision to compare with")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--calls", type=int, default=300, help="calls per case per round")
    parser.add_argument("--quick", action="store_true", help="a few rounds: checks it runs")
    parser.add_argument("--json", help="also write the figures to this file")
    opts = parser.parse_args(args)
    rounds, n = (3, 100) if opts.quick else (opts.rounds, opts.calls)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        old_tree = tmp / "previous"
        subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "worktree",
                "add",
                "--detach",
                "-q",
                str(old_tree),
                opts.previous,
            ],
            check=True,
        )
        try:
            result = measure(old_tree, rounds, n, tmp)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old_tree)],
                check=False,
            )
    result["settings"] = {"previous": opts.previous, "rounds": rounds, "calls": n}
    result["seconds"] = time.perf_counter() - started
    print(f"previous: {opts.previous}; {rounds} rounds of {n} calls per case, interleaved")
    print(
        f"{'case':38} {'old us':>8} {'general':>8} {'new us':>8} {'new/old':>8}  "
        "per round [25th-75th]   new/general"
    )
    met_all = True
    for key, c in result["cases"].items():
        spread = f"[{c['per_round'][0]:.2f}-{c['per_round'][2]:.2f}]" if c["per_round"] else ""
        met = 0 < c["ratio"] <= c["target"]
        met_all &= met
        verdict = "met" if met else "MISSED"
        print(
            f"{key:38} {c['old_us']:8.2f} {c['general_us']:8.2f} {c['new_us']:8.2f} "
            f"{c['ratio']:8.2f}  {spread:13} <= {c['target']}: {verdict:6}  "
            f"{c['ratio_general']:.2f}"
        )
    print(
        "\nbytecodes one call executes beyond the bare function (a tracing function counts "
        "them: the same on every run, however loaded the machine)"
    )
    print(f"{'case':38} {'old':>8} {'new':>8} {'new/old':>8}")
    for key, c in result["cases"].items():
        old, new = c["old_bytecodes"], c["new_bytecodes"]
        print(f"{key:38} {old:8d} {new:8d} {new / old if old > 0 else float('nan'):8.2f}")
    print(f"\n{result['seconds']:.0f} s; every target {'met' if met_all else 'NOT met'}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
