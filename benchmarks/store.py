"""The Redis trajectory store against the in-memory one, side by side in one run.

    python -m benchmarks.store [--url redis://...] [--quick] [--json out.json]

Without ``--url`` it starts its own ``redis-server`` on a free loopback port (persisting
nothing). Tracing is off, so the figures are the guard's and the store's alone. A call is
``guard.call("use", {"item_id": ...})``: a tool with a dependency check on a value a
``create`` call bound earlier in the trajectory: one round trip to check. A ``create`` call
binds: it also posts its finish (written before it returns, its answer read later), a second
round trip it does not wait for.

- per-call overhead (time per call minus the bare function's, medians over interleaved
  rounds) with the Redis store, as a ratio to the in-memory store's;
- the added median latency of one call (median of single calls timed one by one, Redis
  minus memory, alternating): target <= 0.3 ms on loopback;
- round trips per call, counted on the wire (every command or script sent): target <= 2;
  and of those, how many the call waits for (a call's finish is posted: written before it
  returns, its answer read later);
- calls/s with 1, 4 and 16 trajectories in concurrent threads (one process), both stores.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

import toolguard as tg

from ._timing import interleaved, median, overhead_ratios, print_targets, quartiles, us, write_json

TARGET_TRIPS = 2.0
TARGET_ADDED_MS = 0.3


@contextmanager
def redis_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("benchmarks.store: no redis-server (apt-get install -y redis-server, or --url)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as workdir:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", workdir],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        sys.exit("benchmarks.store: redis-server did not start")
                    time.sleep(0.02)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)


def counting_store(url: str) -> tuple[Any, list[int]]:
    """A RedisStore whose connections count what they send (one send: one round trip);
    ``sent[1]`` counts the posted ones (their answers read later)."""
    import redis
    from redis.connection import Connection

    from toolguard.runtime.trajectories.redis_store import RedisStore

    sent = [0, 0]

    class Counting(Connection):
        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            sent[0] += 1
            super().send_packed_command(command, check_health)

    pool = redis.ConnectionPool.from_url(
        url, connection_class=Counting, decode_responses=True, socket_timeout=2
    )
    store = RedisStore(url, client=redis.Redis(connection_pool=pool))
    post = store.lanes.post

    def counted_post(*args: Any) -> Any:
        sent[1] += 1
        return post(*args)

    store.lanes.post = counted_post  # type: ignore[method-assign,assignment]
    return store, sent


def item_guard(
    store: Any, on_guard_error: Literal["fail_closed", "fail_open"] = "fail_closed"
) -> tg.Guard:
    """A guard with ``create`` (binds an item id) and ``use`` (refers to one): the store's
    tests use it too."""
    guard = tg.Guard(store=store, on_guard_error=on_guard_error)

    @guard.tool(produces={"id": "item"})
    def create(name: str) -> dict[str, str]:
        return {"id": name}

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id

    return guard


def opened(guard: tg.Guard, traj_id: str) -> tg.Trajectory:
    traj = guard.trajectory(traj_id)
    traj.start()
    guard.call("create", {"name": "item-1"}, trajectory=traj)
    return traj


def calls_case(guard: tg.Guard, traj: tg.Trajectory, binds: bool) -> Callable[[int], float]:
    """``use`` (a dependency check, binds nothing) or ``create`` (binds a new id each call)."""
    call = guard.call
    names = (f"new-{i}" for i in itertools.count())

    def run(n: int) -> float:
        if binds:
            todo = [{"name": next(names)} for _ in range(n)]
            start = time.perf_counter()
            for args in todo:
                call("create", args, trajectory=traj)
            return time.perf_counter() - start
        args = {"item_id": "item-1"}
        start = time.perf_counter()
        for _ in range(n):
            call("use", args, trajectory=traj)
        return time.perf_counter() - start

    return run


def bare_case(n: int) -> float:
    def use(item_id: str) -> str:
        return item_id

    start = time.perf_counter()
    for _ in range(n):
        use(item_id="item-1")
    return time.perf_counter() - start


def redis_side(client: Any) -> Callable[[], float | None]:
    """Microseconds Redis itself spent per script from now on (INFO commandstats), or None
    where the server does not allow resetting its statistics."""
    try:
        client.config_resetstat()
    except Exception:
        return lambda: None

    def read() -> float | None:
        stats = client.info("commandstats").get("cmdstat_evalsha")
        return float(stats["usec_per_call"]) if stats else None

    return read


def ping_case(client: Any) -> Callable[[int], float]:
    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            client.ping()
        return time.perf_counter() - start

    return run


def single_latencies(cases: dict[str, Callable[[int], float]], n: int) -> dict[str, float]:
    """Median seconds of one call, the cases' calls alternating one by one."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(n):
        for name, case in cases.items():
            samples[name].append(case(1))
    return {name: statistics.median(values) for name, values in samples.items()}


def throughput(guard: tg.Guard, trajectories: int, calls: int, tag: str) -> float:
    """Calls per second with ``trajectories`` trajectories in as many threads."""
    trajs = [opened(guard, f"{tag}-{trajectories}-{i}") for i in range(trajectories)]
    barrier = threading.Barrier(trajectories + 1)
    args = {"item_id": "item-1"}

    def work(traj: tg.Trajectory) -> None:
        barrier.wait()
        for _ in range(calls):
            guard.call("use", args, trajectory=traj)

    threads = [threading.Thread(target=work, args=(t,)) for t in trajs]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for traj in trajs:
        traj.end()
    return trajectories * calls / elapsed


def over(case: list[float], bare: list[float]) -> list[float]:
    return [c - b for c, b in zip(case, bare, strict=True)]


def run(url: str, quick: bool) -> dict[str, Any]:
    rounds, n, singles, per_thread = (5, 200, 300, 100) if quick else (21, 1000, 3000, 1000)
    store, sent = counting_store(url)
    memory, shared = item_guard("memory"), item_guard(store)
    mem_traj, red_traj = opened(memory, "bench-memory"), opened(shared, "bench-redis")

    trips, waited = {}, {}
    for shape, binds in (("check only", False), ("binds", True)):
        before, posted = sent[0], sent[1]
        calls_case(shared, red_traj, binds)(100)
        trips[shape] = (sent[0] - before) / 100
        waited[shape] = trips[shape] - (sent[1] - posted) / 100

    cases = {"bare": bare_case}
    for shape, binds in (("check only", False), ("binds", True)):
        cases[f"memory {shape}"] = calls_case(memory, mem_traj, binds)
        cases[f"redis {shape}"] = calls_case(shared, red_traj, binds)
    samples = interleaved(cases, rounds=rounds, n=n)
    timed = {k: v for k, v in cases.items() if k != "bare"}
    timed["PING"] = ping_case(store.client)  # one bare round trip of redis-py: the floor
    server = redis_side(store.client)
    latency = single_latencies(timed, singles)
    scripts_us = server()
    figures: dict[str, dict[str, float]] = {}
    for shape in ("check only", "binds"):
        mem, red = f"memory {shape}", f"redis {shape}"
        ratios = overhead_ratios(samples, red, mem, "bare")
        figures[shape] = {
            "memory_overhead_s": median(over(samples[mem], samples["bare"])),
            "redis_overhead_s": median(over(samples[red], samples["bare"])),
            "overhead_ratio": median(ratios),
            "ratio_q1": quartiles(ratios)[0],
            "ratio_q3": quartiles(ratios)[1],
            "latency_memory_s": latency[mem],
            "latency_redis_s": latency[red],
            "added_ms": (latency[red] - latency[mem]) * 1e3,
            "round_trips_per_call": trips[shape],
            "round_trips_waited_per_call": waited[shape],
        }

    rates: dict[str, dict[int, float]] = {"memory": {}, "redis": {}}
    for k in (1, 4, 16):
        for name, guard in (("memory", memory), ("redis", shared)):
            rates[name][k] = throughput(guard, k, per_thread, name)
    mem_traj.end()
    red_traj.end()

    print("per call (tracing off): overhead = time per call - the bare function's, medians")
    print("over interleaved rounds; latency = median of single calls, alternating")
    for shape, f in figures.items():
        print(f"  {shape}:")
        print(
            f"    overhead   memory {us(f['memory_overhead_s'])}"
            f"   redis {us(f['redis_overhead_s'])}"
        )
        print(
            f"    redis / memory overhead ratio {f['overhead_ratio']:.1f}x"
            f" (quartiles {f['ratio_q1']:.1f}-{f['ratio_q3']:.1f})"
        )
        print(
            f"    latency    memory {f['latency_memory_s'] * 1e3:.3f} ms   redis"
            f" {f['latency_redis_s'] * 1e3:.3f} ms   added {f['added_ms']:.3f} ms"
        )
        print(
            f"    round trips per call {f['round_trips_per_call']:.2f}, waited for"
            f" {f['round_trips_waited_per_call']:.2f} (the finish is posted)"
        )
    print(f"  one bare round trip (redis-py PING), median: {latency['PING'] * 1e3:.3f} ms")
    if scripts_us is not None:
        print(f"  Redis's own time per script (INFO commandstats): {scripts_us:.1f} us")
    print("calls/s (threads, one trajectory each):")
    for k in (1, 4, 16):
        m, r = rates["memory"][k], rates["redis"][k]
        print(f"  {k:2d} trajectories: memory {m:9.0f}  redis {r:9.0f}")
    targets = {}
    for shape, f in figures.items():
        trips_ok = f["round_trips_per_call"] <= TARGET_TRIPS
        added_ok = f["added_ms"] <= TARGET_ADDED_MS
        targets[f"{shape}: round trips per call <= {TARGET_TRIPS:g}"] = trips_ok
        targets[f"{shape}: added median latency <= {TARGET_ADDED_MS} ms"] = added_ok
    print_targets(targets)
    return {
        "calls": figures,
        "ping_s": latency["PING"],
        "script_us": scripts_us,
        "calls_per_s": {name: {str(k): v for k, v in r.items()} for name, r in rates.items()},
        "targets": targets,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store", description=__doc__)
    parser.add_argument("--url", help="a Redis to use (default: start redis-server on loopback)")
    parser.add_argument("--quick", action="store_true", help="a short run (CI keeps it working)")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = parser.parse_args(argv)
    if args.url:
        result = run(args.url, args.quick)
    else:
        with redis_server() as url:
            result = run(url, args.quick)
    write_json(args.json, result)


if __name__ == "__main__":
    main()
