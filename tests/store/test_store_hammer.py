"""32 threads x 4 processes hammering one trajectory in one Redis store: every step from 1 to
N is taken exactly once, and no binding is lost (each id one process made is usable in the
next)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import redis

import toolguard as tg

WORKER = str(Path(__file__).with_name("store_worker.py"))
PROCS, THREADS, CALLS = 4, 32, 4


def run_both_phases(url: str) -> tuple[list[list], list[list]]:
    """Every process creates its ids; once all have (each says so on stdout, its finishes
    landed), every process uses the next one's."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                WORKER,
                "hammer",
                url,
                "hammered",
                *map(str, (p, PROCS, THREADS, CALLS)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(PROCS)
    ]
    created = []
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # ends when the worker exits: no wait without a bound
        assert line, proc.communicate(timeout=300)[1]
        created.extend(json.loads(line)["created"])
    used = []
    for proc in procs:
        out, err = proc.communicate("use\n", timeout=300)
        assert proc.returncode == 0, err
        used.extend(json.loads(out.strip().splitlines()[-1])["used"])
    return created, used


def test_hammered_trajectory_keeps_every_step_and_binding(redis_url: str) -> None:
    per_phase = PROCS * THREADS * CALLS
    created, used = run_both_phases(redis_url)
    assert len(created) == per_phase and len(used) == per_phase
    assert all(d == "allowed" for _, d, _ in created)
    # Every use names an id another process created: allowed only if its binding arrived.
    assert [c for _, _, c in used if c is not None] == []
    steps = Counter(s for s, _, _ in created + used)
    assert sorted(steps) == list(range(1, 2 * per_phase + 1))
    assert set(steps.values()) == {1}

    # The shared record agrees: T, no failure, and every id bound (read by a fresh replica).
    guard = tg.Guard(store=redis_url)
    traj = guard.trajectory("hammered", summary=False)
    traj.start()
    assert traj.length == 2 * per_phase and traj.first_error_depth == 2 * per_phase + 1
    names = {f"p{p}-t{t}-{i}" for p in range(PROCS) for t in range(THREADS) for i in range(CALLS)}
    assert set(traj.live_values("item")) == names
    traj.end()
    # Every key it holds expires after the idle timeout (the guard's, an hour by default),
    # renewed once a 64th of it has passed: never sooner than the timeout after a round trip.
    client = redis.Redis.from_url(redis_url)
    held = [k for k in guard.store.keys("hammered") if client.exists(k)]
    assert held and all(0 < client.pttl(k) <= 3_600_000 + 3_600_000 // 64 + 1 for k in held)
