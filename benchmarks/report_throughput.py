"""Throughput and memory of `toolguard report` on generated span files.

    .venv/bin/python -m benchmarks.report_throughput [--trajectories 2000] [--steps 100]

Writes OTLP JSON Lines shaped like the guard's (GenAI attributes, resource, batches of 512
spans per line, ints as strings), then times a parse-only loop (orjson.loads per line: the
floor), reading into records, and the whole report; and the peak traced memory of reading a
file with 10x more spans for the same trajectories (it should not grow).
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

from toolguard import _attributes as A
from toolguard._collect import read_records
from toolguard._report import build_report

_BATCH = 512


def _kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _spans(n_traj: int, steps: int, rng: random.Random) -> Any:
    n = 0
    for t in range(n_traj):
        tid = f"traj-{t:06d}"
        trace = f"{rng.getrandbits(128):032x}"
        length = rng.randint(max(1, steps // 2), steps * 3 // 2)
        fed = rng.choice([length + 1, rng.randint(1, length)])
        for step in range(1, length + 1):
            valid = step < fed
            attrs = [
                _kv(A.GEN_AI_OPERATION_NAME, "execute_tool"),
                _kv(A.GEN_AI_TOOL_NAME, "search_contact"),
                _kv(A.GEN_AI_TOOL_TYPE, "function"),
                _kv(A.GEN_AI_TOOL_CALL_ID, f"call_{n}"),
                _kv(A.TRAJECTORY_ID, tid),
                _kv(A.STEP, step),
                _kv(A.VALID, valid),
                _kv(A.DECISION, "allowed" if valid else "blocked"),
            ]
            if not valid:
                attrs += [
                    _kv(A.CAUSE, "precondition"),
                    _kv(A.CHECK, "requires.x"),
                    _kv(A.MESSAGE, "the contact must exist"),
                    _kv(A.ERROR_TYPE, "toolguard.precondition"),
                ]
            n += 1
            yield trace, f"{n:016x}", "execute_tool search_contact", attrs
        summ = [
            _kv(A.TRAJECTORY_ID, tid),
            _kv(A.TRAJECTORY_LENGTH, length),
            _kv(A.TRAJECTORY_FED, fed),
            _kv(A.TRAJECTORY_SUCCESS, rng.random() < 0.6),
            _kv(A.LABEL_PREFIX + "model", f"m{t % 3}"),
            _kv(A.LABEL_PREFIX + "task", f"t{t}"),
        ]
        if fed <= length:
            summ.append(_kv(A.TRAJECTORY_FIRST_ERROR_CAUSE, "precondition"))
        n += 1
        yield trace, f"{n:016x}", "toolguard.trajectory", summ


def generate(path: Path, n_traj: int, steps: int, seed: int = 1) -> int:
    resource = {"attributes": [_kv("service.name", "bench"), _kv("telemetry.sdk.name", "otel")]}
    batch: list[dict[str, Any]] = []
    count = 0
    with open(path, "wb") as f:

        def flush() -> None:
            req = {
                "resourceSpans": [
                    {
                        "resource": resource,
                        "scopeSpans": [{"scope": {"name": "toolguard"}, "spans": batch}],
                    }
                ]
            }
            f.write(orjson.dumps(req) + b"\n")
            batch.clear()

        for trace, sid, name, attrs in _spans(n_traj, steps, random.Random(seed)):
            batch.append(
                {
                    "traceId": trace,
                    "spanId": sid,
                    "name": name,
                    "kind": 1,
                    "startTimeUnixNano": "1",
                    "endTimeUnixNano": "2",
                    "attributes": attrs,
                    "status": {},
                }
            )
            count += 1
            if len(batch) == _BATCH:
                flush()
        if batch:
            flush()
    return count


def _best(fns: dict[str, Any], repeat: int) -> dict[str, float]:
    """Best of ``repeat`` runs, interleaved so a busy machine slows every contender alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            # CPU time of this process: other work on a shared machine does not count.
            t0 = time.process_time()
            fn()
            times[name].append(time.process_time() - t0)
    return {k: min(v) for k, v in times.items()}


def _parse_only_no_gc(path: Path) -> None:
    gc.disable()
    try:
        _parse_only(path)
    finally:
        gc.enable()


def _parse_only(path: Path) -> None:
    with open(path, "rb") as f:
        for line in f:
            orjson.loads(line)


def _peak(path: Path) -> int:
    tracemalloc.start()
    read_records([str(path)])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trajectories", type=int, default=2000)
    p.add_argument("--steps", type=int, default=100, help="mean calls per trajectory")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp, "big.jsonl"), Path(tmp, "small.jsonl")
        n_big = generate(big, args.trajectories, args.steps)
        n_small = generate(small, args.trajectories, max(1, args.steps // 10))
        mb = big.stat().st_size / 1e6
        best = _best(
            {
                "parse": lambda: _parse_only(big),
                "parse_nogc": lambda: _parse_only_no_gc(big),
                "read": lambda: read_records([str(big)]),
                "report": lambda: build_report(read_records([str(big)])[0], by=["model"]),
            },
            args.repeat,
        )
        print(f"file: {n_big:,} spans, {args.trajectories:,} trajectories, {mb:.1f} MB")
        base = best["parse"]
        for name, what in (
            ("parse", "parse only (orjson.loads per line)"),
            ("parse_nogc", "parse only, cyclic GC off"),
            ("read", "read into records"),
            ("report", "whole report (--by model)"),
        ):
            t = best[name]
            print(f"{what:<36} {t:7.3f} s {n_big / t:>12,.0f} spans/s  {t / base:5.2f}x parse")
        many = Path(tmp, "many.jsonl")
        n_many = generate(many, args.trajectories * 10, max(1, args.steps // 10))
        print("peak traced memory of read_records (tracemalloc):")
        for path, n, n_traj in (
            (big, n_big, args.trajectories),
            (small, n_small, args.trajectories),
            (many, n_many, args.trajectories * 10),
        ):
            print(f"  {n:>9,} spans, {n_traj:>7,} trajectories: {_peak(path) / 1e6:6.1f} MB")


if __name__ == "__main__":
    main()
