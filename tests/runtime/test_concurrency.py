"""1,000 trajectories interleaved across threads and asyncio tasks: no step or binding crosses.

Half of the trajectories run synchronously on a thread pool; the other half run as asyncio
tasks on several event loops, each loop in its own thread, all at the same time. Every tool
yields (``time.sleep(0)`` / ``asyncio.sleep(0)``) so the scheduler interleaves them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import toolguard as tg

N = 1000
N_SYNC = N // 2
LOOPS = 4


def rounds(i: int) -> int:
    return 1 + i % 4


def expected_length(i: int) -> int:
    # per round: search + use; then use of the explicitly bound id; then two foreign uses
    return 2 * rounds(i) + 3


def build(otel):
    guard = otel.guard()

    @guard.tool(produces={"id": "contact_id"})
    def search(owner: int, k: int) -> dict:
        time.sleep(0)
        return {"id": f"id-{owner}-{k}"}

    @guard.tool(refs={"contact_id": "contact_id"})
    def use(contact_id: str) -> str:
        time.sleep(0)
        return contact_id

    @guard.tool(produces={"id": "contact_id"})
    async def asearch(owner: int, k: int) -> dict:
        await asyncio.sleep(0)
        return {"id": f"id-{owner}-{k}"}

    @guard.tool(refs={"contact_id": "contact_id"})
    async def ause(contact_id: str) -> str:
        await asyncio.sleep(0)
        return contact_id

    return guard, search, use, asearch, ause


def foreign(i: int) -> tuple[str, str]:
    j = (i + 1) % N
    return f"id-{j}-0", f"user-{j}"


def test_thousand_interleaved_trajectories(otel):
    guard, search, use, asearch, ause = build(otel)
    problems: list[str] = []
    lock = threading.Lock()

    def note(msg: str) -> None:
        with lock:
            problems.append(msg)

    def check_results(i: int, results: list) -> None:
        n = rounds(i)
        for k in range(n):
            if results[2 * k + 1] != f"id-{i}-{k}":
                note(f"{i}: use round {k} gave {results[2 * k + 1]!r}")
        if results[2 * n] != f"user-{i}":
            note(f"{i}: bound value gave {results[2 * n]!r}")
        for r in results[2 * n + 1 :]:
            if not (isinstance(r, tg.Rejection) and r.cause == "dependency"):
                note(f"{i}: a foreign value was accepted: {r!r}")

    def run_sync(i: int) -> None:
        results = []
        with otel.trajectory(f"tr-{i}", labels={"kind": "sync"}) as traj:
            traj.bind("contact_id", f"user-{i}")
            for k in range(rounds(i)):
                results.append(search(i, k))
                # alternate the decorator and dispatch by name
                results.append(
                    use(f"id-{i}-{k}")
                    if k % 2
                    else guard.call("use", {"contact_id": f"id-{i}-{k}"})
                )
            results.append(use(f"user-{i}"))
            for value in foreign(i):
                results.append(guard.call("use", {"contact_id": value}))
            traj.success = True
        check_results(i, results)

    async def run_async(i: int) -> None:
        results = []
        async with otel.trajectory(f"tr-{i}", labels={"kind": "async"}) as traj:
            traj.bind("contact_id", f"user-{i}")
            for k in range(rounds(i)):
                results.append(await asearch(i, k))
                results.append(await guard.acall("ause", {"contact_id": f"id-{i}-{k}"}))
            results.append(await ause(f"user-{i}"))
            batch = await guard.acall_batch([("ause", {"contact_id": v}) for v in foreign(i)])
            results.extend(batch)
            traj.success = True
        check_results(i, results)

    def loop_thread(indices: list[int]) -> None:
        async def main() -> None:
            await asyncio.gather(*(run_async(i) for i in indices))

        asyncio.run(main())

    async_indices = list(range(N_SYNC, N))
    with ThreadPoolExecutor(max_workers=16 + LOOPS) as pool:
        futures = [pool.submit(loop_thread, async_indices[k::LOOPS]) for k in range(LOOPS)]
        futures += [pool.submit(run_sync, i) for i in range(N_SYNC)]
        for f in futures:
            f.result()

    assert problems == []

    calls = defaultdict(list)
    for span in otel.call_spans():
        calls[span.attributes["toolguard.trajectory.id"]].append(span)
    summaries = {s.attributes["toolguard.trajectory.id"]: s for s in otel.summary_spans()}
    assert len(summaries) == N
    assert len(calls) == N
    for i in range(N):
        tid = f"tr-{i}"
        spans = calls[tid]
        summary = summaries[tid]
        length = expected_length(i)
        steps = sorted(s.attributes["toolguard.step"] for s in spans)
        assert steps == list(range(1, length + 1)), (tid, steps)
        by_step = {s.attributes["toolguard.step"]: s for s in spans}
        for step in range(1, length - 1):
            assert by_step[step].attributes["toolguard.valid"] is True, (tid, step)
        for step in (length - 1, length):
            assert by_step[step].attributes["toolguard.cause"] == "dependency", (tid, step)
        a = summary.attributes
        assert a["toolguard.trajectory.length"] == length
        assert a["toolguard.trajectory.first_error_depth"] == length - 1
        assert a["toolguard.trajectory.first_error.cause"] == "dependency"
        assert a["toolguard.trajectory.success"] is True
        assert a["toolguard.label.kind"] == ("sync" if i < N_SYNC else "async")
        for span in spans:  # every call span sits under its own trajectory's summary span
            assert span.parent is not None
            assert span.parent.span_id == summary.context.span_id, tid
            assert span.context.trace_id == summary.context.trace_id, tid
    assert tg.current_trajectory() is None
