"""Steps reserved by call id (``traj.reserve([...])``, one model turn's calls in emission order)
on a shared trajectory whose store does not answer in time: the reservation's steps are
provisional, and it is reconciled like a begin given up on (docs/deployment.md, "When the
store is down or slow"). T counts every reserved call once, whether the reservation ran in
Redis late, never, or after its reconciliation (refused); a call whose own begin is not
answered either keeps the step the reservation gave it.

The late scripts are held by the test (``Held``), or by a paused redis-server whose buffered
commands run when it resumes; nothing here depends on timing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import redis
from redis_server import RedisServer
from test_store_outage import call_in_thread
from test_store_token import marks, reader, steps, sync

import toolguard as tg
from benchmarks.store import item_guard
from toolguard.runtime.trajectories.redis_store import RedisStore
from toolguard.runtime.trajectories.shared import STORE_CHECK
from toolguard.runtime.trajectories.store import TrajectoryStoreError


class Held:
    """The guard's next script of a name is held: its caller hears a timeout, as when Redis
    hangs, and the script reaches Redis only when the test lands it (or never)."""

    def __init__(self, guard: tg.Guard) -> None:
        store = guard.store
        assert isinstance(store, RedisStore)
        self._run = store.run
        self._armed: list[str] = []
        self.held: list[tuple[str, Sequence[str], Sequence[Any]]] = []
        store.run = self.run  # type: ignore[method-assign]

    def hold_next(self, script: str) -> None:
        self._armed.append(script)

    def run(self, script: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        if script in self._armed:
            self._armed.remove(script)
            self.held.append((script, keys, args))
            raise TrajectoryStoreError("TimeoutError: Timeout reading from socket (held)")
        return self._run(script, keys, args)

    def land(self) -> None:
        """The oldest held script reaches Redis now (its answer goes nowhere)."""
        script, keys, args = self.held.pop(0)
        self._run(script, keys, args)


def reserved(url: str, guard: tg.Guard, traj_id: str) -> dict[str, str]:
    """The steps the shared record keeps reserved by call id."""
    store = guard.store
    assert isinstance(store, RedisStore)
    client = redis.Redis.from_url(url, decode_responses=True)
    meta: dict[str, str] = client.hgetall(store.keys(traj_id)[0])  # type: ignore[assignment]
    return {k: v for k, v in meta.items() if k.startswith("r:")}


def opened(guard: tg.Guard, traj_id: str) -> tg.Trajectory:
    traj = guard.trajectory(traj_id, summary=False)
    traj.start()
    return traj


def test_a_reservation_that_never_ran_is_counted_once(redis_url: str) -> None:
    guard = item_guard(redis_url, on_guard_error="fail_open")
    held = Held(guard)
    traj = opened(guard, "never")
    held.hold_next("reserve")
    assert traj.reserve(["c1", "c2"]) == [1, 2]  # provisional
    # the store answers again: the calls take the steps the reservation gave them
    assert guard.call("create", {"name": "a"}, trajectory=traj, call_id="c1") == {"id": "a"}
    assert guard.call("create", {"name": "b"}, trajectory=traj, call_id="c2") == {"id": "b"}
    assert steps(traj) == [1, 2]
    assert traj.length == 2 and reader(redis_url, "never").length == 2
    assert reserved(redis_url, guard, "never") == {}
    held.land()  # too late: refused, it was counted
    assert reader(redis_url, "never").length == 2 and reserved(redis_url, guard, "never") == {}


def test_a_reservation_that_ran_late_keeps_its_steps(redis_url: str) -> None:
    guard = item_guard(redis_url, on_guard_error="fail_open")
    held = Held(guard)
    traj = opened(guard, "late")
    held.hold_next("reserve")
    assert traj.reserve(["c1", "c2"]) == [1, 2]
    held.land()  # Redis ran it after its caller gave up: steps 1 and 2 reserved there
    assert guard.call("create", {"name": "b"}, trajectory=traj, call_id="c2") == {"id": "b"}
    assert guard.call("create", {"name": "a"}, trajectory=traj, call_id="c1") == {"id": "a"}
    assert steps(traj) == [2, 1]
    assert reader(redis_url, "late").length == 2 and reserved(redis_url, guard, "late") == {}


def test_calls_whose_begins_fail_too_keep_their_provisional_steps(redis_url: str) -> None:
    guard = item_guard(redis_url, on_guard_error="fail_open")
    held = Held(guard)
    traj = opened(guard, "both")
    held.hold_next("reserve")
    held.hold_next("begin")
    held.hold_next("begin")
    assert traj.reserve(["c1", "c2"]) == [1, 2]
    assert guard.call("create", {"name": "b"}, trajectory=traj, call_id="c2") == {"id": "b"}
    assert guard.call("create", {"name": "a"}, trajectory=traj, call_id="c1") == {"id": "a"}
    assert steps(traj) == [2, 1]  # emission order, as reserved
    sync(traj)
    assert traj.length == 2 and reader(redis_url, "both").length == 2
    assert reserved(redis_url, guard, "both") == {} and marks(redis_url, guard, "both") == {}
    while held.held:  # all three arrive too late: refused
        held.land()
    assert reader(redis_url, "both").length == 2
    assert reserved(redis_url, guard, "both") == {} and marks(redis_url, guard, "both") == {}


def test_a_reserved_call_whose_begin_fails_keeps_its_reserved_step(redis_url: str) -> None:
    guard = item_guard(redis_url, on_guard_error="fail_open")
    held = Held(guard)
    traj = opened(guard, "kept")
    assert traj.reserve(["c1", "c2"]) == [1, 2]  # answered: reserved in the store
    held.hold_next("begin")
    assert guard.call("create", {"name": "b"}, trajectory=traj, call_id="c2") == {"id": "b"}
    assert guard.call("create", {"name": "a"}, trajectory=traj, call_id="c1") == {"id": "a"}
    assert steps(traj) == [2, 1]
    assert traj.length == 2 and reader(redis_url, "kept").length == 2
    assert reserved(redis_url, guard, "kept") == {}
    held.land()  # c2's begin, refused
    assert reader(redis_url, "kept").length == 2 and marks(redis_url, guard, "kept") == {}


def test_a_reserved_call_failing_closed_is_blocked_at_its_step(redis_url: str) -> None:
    guard = item_guard(redis_url)
    held = Held(guard)
    traj = opened(guard, "closed")
    held.hold_next("reserve")
    held.hold_next("begin")
    assert traj.reserve(["c1", "c2"]) == [1, 2]
    answer = guard.call("create", {"name": "b"}, trajectory=traj, call_id="c2")
    assert isinstance(answer, tg.Rejection) and answer.check == STORE_CHECK
    assert guard.call("create", {"name": "a"}, trajectory=traj, call_id="c1") == {"id": "a"}
    assert steps(traj) == [2, 1]
    other = reader(redis_url, "closed")
    assert (other.length, other.first_error_depth) == (2, 2)


def test_a_reservation_behind_another_process_is_counted_after_its_steps(redis_url: str) -> None:
    a = item_guard(redis_url, on_guard_error="fail_open")
    held = Held(a)
    ta = opened(a, "behind")
    assert a.call("create", {"name": "x"}, trajectory=ta) == {"id": "x"}  # step 1
    held.hold_next("reserve")
    assert ta.reserve(["c1", "c2"]) == [2, 3]  # provisional: a knows step 1 only
    b = item_guard(redis_url)
    tb = opened(b, "behind")
    assert b.call("create", {"name": "y"}, trajectory=tb) == {"id": "y"}  # takes step 2
    # a's next round trip reconciles the reservation after b's step: c1 and c2 get 3 and 4,
    # so no two calls' spans share a step
    assert a.call("create", {"name": "z"}, trajectory=ta, call_id="c1") == {"id": "z"}
    assert a.call("use", {"item_id": "y"}, trajectory=ta, call_id="c2") == "y"
    assert (steps(ta), steps(tb)) == ([1, 3, 4], [2])
    sync(tb)
    assert tb.length == 4
    assert b.call("use", {"item_id": "z"}, trajectory=tb) == "z"
    assert steps(tb) == [2, 5]
    held.land()
    assert reader(redis_url, "behind").length == 5


def test_a_paused_store_during_a_turn(redis_server: RedisServer) -> None:
    url = redis_server.url
    guard = item_guard(url, on_guard_error="fail_open")
    traj = opened(guard, "paused")
    redis_server.pause()  # the reservation and c1's begin are read only once it resumes
    try:
        assert traj.reserve(["c1", "c2"]) == [1, 2]
        answer = call_in_thread(guard, "create", {"name": "a"}, trajectory=traj, call_id="c1")
        assert answer == {"id": "a"}
    finally:
        redis_server.resume()
    # whether Redis ran them before this call's begin, after it (refused) or not at all
    assert guard.call("create", {"name": "b"}, trajectory=traj, call_id="c2") == {"id": "b"}
    assert steps(traj) == [1, 2]
    assert reserved(url, guard, "paused") == {} and marks(url, guard, "paused") == {}
    other = reader(url, "paused")
    assert other.length == 2 and set(other.live_values("item")) == {"a", "b"}


def test_the_reserve_script_runs_once_per_token(redis_url: str) -> None:
    record = RedisStore(redis_url).record("once", "replica")
    assert record.reserve(0, 0, ["c1", "c2"], [], "t1")[0] == [1, 2]
    again, got = record.reserve(0, 0, ["c1", "c2"], [], "t1")  # the same reservation, resent
    assert (again, got.length) == ([1, 2], 2)
    record.gave_up_reserving("t2", [("c3", 3), (None, 4)])
    assert record.sync(0, 0, []).length == 4  # counted once, at its provisional steps
    _, got = record.reserve(0, 0, ["c3", None], [], "t2")  # arrives too late: refused
    assert got.length == 4
    assert record.begin(0, 0, "c3", None, "", [], "b1")[0] == 3


@pytest.mark.parametrize("ran", [True, False])
def test_next_step_not_answered_is_counted_once(redis_url: str, ran: bool) -> None:
    guard = item_guard(redis_url, on_guard_error="fail_open")
    held = Held(guard)
    traj = opened(guard, f"next-{ran}")
    held.hold_next("reserve")
    assert traj.next_step() == 1
    if ran:
        held.land()
    assert guard.call("create", {"name": "a"}, trajectory=traj) == {"id": "a"}
    assert steps(traj) == [2]
    assert reader(redis_url, f"next-{ran}").length == 2


def test_a_call_reserved_elsewhere_whose_begin_fails_is_counted_once(redis_url: str) -> None:
    a = item_guard(redis_url)
    ta = opened(a, "elsewhere")
    assert ta.reserve(["c1", "c2"]) == [1, 2]  # a reserves the turn; b runs one of its calls
    b = item_guard(redis_url, on_guard_error="fail_open")
    held = Held(b)
    tb = opened(b, "elsewhere")
    held.hold_next("begin")
    assert b.call("create", {"name": "x"}, trajectory=tb, call_id="c2") == {"id": "x"}
    assert steps(tb) == [2]  # the step a reserved (b read it in the log)
    sync(tb)  # b's begin never ran: its reservation counts the call, once
    assert tb.length == 2 and reserved(redis_url, b, "elsewhere") == {"r:c1": "1"}
    assert a.call("create", {"name": "y"}, trajectory=ta, call_id="c1") == {"id": "y"}
    assert (steps(ta), reader(redis_url, "elsewhere").length) == ([1], 2)
    held.land()
    assert reader(redis_url, "elsewhere").length == 2


def test_a_call_reserved_elsewhere_unknown_here_is_counted_once(redis_url: str) -> None:
    b = item_guard(redis_url, on_guard_error="fail_open")
    held = Held(b)
    tb = opened(b, "unknown")  # b has not synced since a's reservation below
    a = item_guard(redis_url)
    ta = opened(a, "unknown")
    assert ta.reserve(["c1", "c2"]) == [1, 2]
    held.hold_next("begin")
    assert b.call("create", {"name": "x"}, trajectory=tb, call_id="c2") == {"id": "x"}
    # b's span has the next step it knew of, which a's c1 also has: that is what is not
    # guaranteed; T counts each call once
    assert steps(tb) == [1]
    sync(tb)
    assert tb.length == 2 and reserved(redis_url, b, "unknown") == {"r:c1": "1"}
    assert a.call("create", {"name": "y"}, trajectory=ta, call_id="c1") == {"id": "y"}
    assert steps(ta) == [1] and reader(redis_url, "unknown").length == 2


def test_a_lost_reservation_whose_call_ran_elsewhere_first_is_counted_once(
    redis_url: str,
) -> None:
    a = item_guard(redis_url, on_guard_error="fail_open")
    held = Held(a)
    ta = opened(a, "lost")
    held.hold_next("reserve")
    assert ta.reserve(["c1", "c2"]) == [1, 2]  # never reaches Redis (held, never landed)
    b = item_guard(redis_url)
    tb = opened(b, "lost")
    # b runs c2 before a's next round trip tells the store of the reservation: a new step
    assert b.call("create", {"name": "x"}, trajectory=tb, call_id="c2") == {"id": "x"}
    assert a.call("create", {"name": "y"}, trajectory=ta, call_id="c1") == {"id": "y"}
    assert (steps(ta), steps(tb)) == ([2], [1])  # c1 after b's step; c2 counted once
    assert reader(redis_url, "lost").length == 2
    held.land()  # refused
    assert reader(redis_url, "lost").length == 2
