"""A begin the client gave up on (Redis hung or slow past the timeout) may still run in Redis,
late, or never: each begin carries a token, and the replica's next round trip that is answered
reconciles it. T counts the call once, no pending mark outlives it, and a begin that arrives
after its reconciliation is refused. A pending mark whose process died is cleared when the
trajectory's summary is claimed. (docs/deployment.md, "When the store is down or slow".)

The late begins are held by the test (``HeldBegins``), or by a paused redis-server whose
buffered commands run when it resumes; nothing here depends on timing."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from redis_server import RedisServer
from test_store_outage import call_in_thread

import toolguard as tg
from benchmarks.store import item_guard
from toolguard.runtime.trajectories.redis_store import RedisStore
from toolguard.runtime.trajectories.shared import SharedTrajectory
from toolguard.runtime.trajectories.store import TrajectoryStoreError

WORKER = str(Path(__file__).with_name("store_worker.py"))


class HeldBegins:
    """The guard's next begin is held: its caller hears a timeout, as when Redis hangs, and
    the script reaches Redis only when the test lands it (or never)."""

    def __init__(self, guard: tg.Guard) -> None:
        store = guard.store
        assert isinstance(store, RedisStore)
        self._run = store.run
        self._armed = 0
        self.held: list[tuple[Sequence[str], Sequence[Any]]] = []
        store.run = self.run  # type: ignore[method-assign]

    def hold_next(self) -> None:
        self._armed += 1

    def run(self, script: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        if script == "begin" and self._armed:
            self._armed -= 1
            self.held.append((keys, args))
            raise TrajectoryStoreError("TimeoutError: Timeout reading from socket (held)")
        return self._run(script, keys, args)

    def land(self) -> None:
        """The held begin reaches Redis now (its answer goes nowhere: its caller gave up)."""
        keys, args = self.held.pop(0)
        self._run("begin", keys, args)


def marks(url: str, guard: tg.Guard, traj_id: str) -> dict[str, str]:
    """The steps the shared record has pending."""
    store = guard.store
    assert isinstance(store, RedisStore)
    client = redis.Redis.from_url(url, decode_responses=True)
    meta: dict[str, str] = client.hgetall(store.keys(traj_id)[0])  # type: ignore[assignment]
    return {k: v for k, v in meta.items() if k.startswith("p:")}


def sync(traj: tg.Trajectory) -> None:
    assert isinstance(traj, SharedTrajectory)
    traj.sync()


def steps(traj: tg.Trajectory) -> list[int | None]:
    return [v.step for v in traj.verdicts]


def reader(url: str, traj_id: str) -> tg.Trajectory:
    """A fresh replica of the shared record (another process's view)."""
    traj = item_guard(url).trajectory(traj_id, summary=False)
    traj.start()
    return traj


def test_a_begin_redis_ran_late_leaves_no_pending_mark(redis_server: RedisServer) -> None:
    url = redis_server.url
    guard = item_guard(url, on_guard_error="fail_open")
    traj = guard.trajectory("late", summary=False)
    traj.start()
    redis_server.pause()  # the begin is read by Redis only once it resumes: after the timeout
    try:
        assert call_in_thread(guard, "create", {"name": "a"}, trajectory=traj) == {"id": "a"}
    finally:
        redis_server.resume()
    # The next round trip reconciles the begin given up on: whether Redis ran it before this
    # call's begin, after it (refused) or not at all, the record agrees with the spans.
    assert guard.call("create", {"name": "b"}, trajectory=traj) == {"id": "b"}
    assert steps(traj) == [1, 2]
    assert marks(url, guard, "late") == {}
    other = reader(url, "late")
    assert other.length == 2 and set(other.live_values("item")) == {"a", "b"}


def test_a_held_begin_run_before_the_next_round_trip_keeps_its_step(redis_url: str) -> None:
    guard = item_guard(redis_url, on_guard_error="fail_open")
    held = HeldBegins(guard)
    seen: list[set[str]] = []

    @guard.tool(produces={"id": "item"})
    def create_late(name: str) -> dict[str, str]:
        held.land()  # Redis runs the begin while the tool runs: step 1, marked pending
        seen.append(set(marks(redis_url, guard, "kept")))
        return {"id": name}

    traj = guard.trajectory("kept", summary=False)
    traj.start()
    held.hold_next()
    assert guard.call("create_late", {"name": "a"}, trajectory=traj) == {"id": "a"}
    assert seen == [{"p:1"}]
    assert guard.call("create", {"name": "b"}, trajectory=traj) == {"id": "b"}
    assert steps(traj) == [1, 2]
    assert marks(redis_url, guard, "kept") == {}  # nobody waits for it any more
    other = reader(redis_url, "kept")
    assert other.length == 2 and set(other.live_values("item")) == {"a", "b"}


def test_a_held_begin_run_after_its_reconciliation_is_refused(redis_url: str) -> None:
    guard = item_guard(redis_url, on_guard_error="fail_open")
    held = HeldBegins(guard)
    traj = guard.trajectory("refused", summary=False)
    traj.start()
    held.hold_next()
    assert guard.call("create", {"name": "a"}, trajectory=traj) == {"id": "a"}
    assert guard.call("create", {"name": "b"}, trajectory=traj) == {"id": "b"}
    held.land()  # too late: the record counted it at its provisional step already
    assert marks(redis_url, guard, "refused") == {}
    assert reader(redis_url, "refused").length == 2
    assert guard.call("create", {"name": "c"}, trajectory=traj) == {"id": "c"}
    assert steps(traj) == [1, 2, 3]


def test_begins_given_up_in_a_row_are_reconciled_together(redis_url: str) -> None:
    guard = item_guard(redis_url, on_guard_error="fail_open")
    held = HeldBegins(guard)
    traj = guard.trajectory("row", summary=False)
    traj.start()
    assert guard.call("create", {"name": "a"}, trajectory=traj) == {"id": "a"}
    held.hold_next()
    held.hold_next()
    # valid calls that write nothing: no round trip at all until the next call
    assert guard.call("use", {"item_id": "a"}, trajectory=traj) == "a"
    assert guard.call("use", {"item_id": "a"}, trajectory=traj) == "a"
    held.land()  # the first ran late (step 2); the second never does
    assert guard.call("create", {"name": "b"}, trajectory=traj) == {"id": "b"}
    assert steps(traj) == [1, 2, 3, 4]
    assert reader(redis_url, "row").length == 4
    held.land()  # refused
    assert reader(redis_url, "row").length == 4
    assert marks(redis_url, guard, "row") == {}


def test_a_provisional_step_another_process_took_is_counted_once(redis_url: str) -> None:
    a = item_guard(redis_url, on_guard_error="fail_open")
    held = HeldBegins(a)
    ta = a.trajectory("stale", summary=False)
    ta.start()
    assert a.call("create", {"name": "x"}, trajectory=ta) == {"id": "x"}
    b = item_guard(redis_url)
    tb = b.trajectory("stale", summary=False)
    tb.start()
    assert b.call("create", {"name": "y"}, trajectory=tb) == {"id": "y"}  # step 2
    # a's copy is one step behind: the call that fails open takes step 2 too (its span says
    # so, and cannot be told otherwise); the store counts it at the next free step.
    held.hold_next()
    assert a.call("create", {"name": "z"}, trajectory=ta) == {"id": "z"}
    assert a.call("create", {"name": "w"}, trajectory=ta) == {"id": "w"}
    assert (steps(ta), steps(tb)) == ([1, 2, 4], [2])
    sync(tb)
    assert tb.length == 4  # T: the four calls emitted
    held.land()  # refused: it was counted
    assert b.call("use", {"item_id": "z"}, trajectory=tb) == "z"
    assert steps(tb) == [2, 5]  # no later call takes a step already counted
    assert marks(redis_url, a, "stale") == {}


def test_a_given_step_whose_begin_never_ran_is_counted_at_that_step(redis_url: str) -> None:
    guard = item_guard(redis_url, on_guard_error="fail_open")
    held = HeldBegins(guard)
    traj = guard.trajectory("given", summary=False)
    traj.start()
    traj.reserve({"call-3": 3})  # as an MCP host's toolguard/step assigns it
    held.hold_next()
    assert guard.call("create", {"name": "a"}, trajectory=traj, call_id="call-3") == {"id": "a"}
    sync(traj)
    assert reader(redis_url, "given").length == 3
    held.land()
    assert reader(redis_url, "given").length == 3
    assert marks(redis_url, guard, "given") == {}


def test_a_pending_mark_of_a_process_that_died_is_cleared_at_the_end(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    done = subprocess.run(
        [sys.executable, WORKER, "die", redis_url, "died"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    guard = item_guard(redis_url)
    assert set(marks(redis_url, guard, "died")) == {"p:1"}
    traj = guard.trajectory("died")
    traj.start()
    traj.end()  # waits for step 1 (the store's timeout), then claims the summary
    assert any("steps [1] of other processes" in r.getMessage() for r in caplog.records)
    assert marks(redis_url, guard, "died") == {}
    later = item_guard(redis_url).trajectory("died", summary=False)
    later.start()
    assert later.length == 1


def test_the_begin_script_runs_once_per_token(redis_url: str) -> None:
    record = RedisStore(redis_url).record("once", "replica")
    assert record.begin(0, 0, None, None, "w", [], "t1")[0] == 1
    again, sync = record.begin(0, 0, None, None, "w", [], "t1")  # the same begin, resent
    assert (again, sync.length) == (1, 1)
    assert record.begin(0, 0, None, None, "", [], "t2")[0] == 2
    record.gave_up("t3", 3, False)
    assert record.sync(0, 0, []).length == 3  # counted once, at its provisional step
    refused, sync = record.begin(0, 0, None, None, "w", [], "t3")  # arrives too late
    assert (refused, sync.length) == (0, 3)
    assert record.sync(0, 0, []).pending == ()  # t1's mark is this replica's own
    other = RedisStore(redis_url).record("once", "another")
    assert other.sync(0, 0, []).pending == ((1, "w"),)  # t1's, nobody else's
