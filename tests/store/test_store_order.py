"""Writes that land out of their writer's order, and calls that close after their trajectory
ended here: the other processes must see the bindings their writer has. Calls are held
between their begin and their finish with events (never with timing)."""

from __future__ import annotations

import json
import threading
from typing import Any

import redis
from redis_server import RedisServer

import toolguard as tg
from toolguard.runtime.trajectories.redis_store import RedisStore


def holding_guard(url: str, holds: dict[str, tuple[threading.Event, threading.Event]]) -> tg.Guard:
    """``create`` (produces an item) and ``remove`` (refers to one and invalidates it), each
    held until its release is set, after saying it started; ``use`` refers to an item."""
    guard = tg.Guard(store=RedisStore(url, timeout=30))

    def hold(name: str) -> None:
        started, release = holds[name]
        started.set()
        assert release.wait(60)

    @guard.tool(produces={"id": "item"})
    def create(name: str) -> dict[str, str]:
        hold("create")
        return {"id": name}

    @guard.tool(refs={"item_id": "item"}, invalidates={"item_id": "item"})
    def remove(item_id: str) -> dict[str, str]:
        hold("remove")
        return {"removed": item_id}

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id

    return guard


def events() -> dict[str, tuple[threading.Event, threading.Event]]:
    return {name: (threading.Event(), threading.Event()) for name in ("create", "remove")}


def in_thread(fn: Any, *args: Any, **kw: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn(*args, **kw)), daemon=True)
    t.start()
    return t, out


def test_an_invalidation_that_lands_before_its_production_leaves_the_value_stale(
    redis_server: RedisServer,
) -> None:
    holds = events()
    a = holding_guard(redis_server.url, holds)
    ta = a.trajectory("order")
    ta.start()
    ta.bind("item", "x")
    t1, made = in_thread(a.call, "create", {"name": "x"}, trajectory=ta)
    assert holds["create"][0].wait(60)
    t2, removed = in_thread(a.call, "remove", {"item_id": "x"}, trajectory=ta)
    assert holds["remove"][0].wait(60)
    # Both steps taken; their finishes go to a store that is gone, the production first.
    redis_server.stop()
    holds["create"][1].set()
    t1.join(60)
    holds["remove"][1].set()
    t2.join(60)
    assert made == [{"id": "x"}] and removed == [{"removed": "x"}]
    redis_server.start()  # an empty server on the same port
    for _ in range(3):  # the failed finishes' answers read, their events sent again
        ta.sync()
    log = redis.Redis.from_url(redis_server.url, decode_responses=True).lrange(
        a.store.keys("order")[1], 0, -1
    )
    kinds = [e[0] for e in log if e[0] in "pi" and json.loads(e[1:])[1] == "item"]
    # They landed in the reverse of the order they were made in; then the record the empty
    # server had forgotten was started again from what A knows (a production, then its
    # invalidation: test_store_forgotten.py).
    assert kinds == ["i", "p", "p", "i"]
    binding = ta.lookup("item", "x")
    assert binding is not None and not binding.live  # as its writer has it
    other = tg.Guard(store=redis_server.url).trajectory("order", summary=False)
    other.start()
    seen = other.lookup("item", "x")
    assert seen is not None and not seen.live and seen.invalidated_by == binding.invalidated_by
    ta.end()


def test_a_production_sent_twice_does_not_revive_a_value_invalidated_in_between(
    redis_url: str,
) -> None:
    """A finish whose answer was lost is sent again: its production lands twice, the second
    time after another process's call invalidated the value."""
    holds = events()
    for _, release in holds.values():
        release.set()  # nothing is held here
    a, b = holding_guard(redis_url, holds), holding_guard(redis_url, holds)
    ta, tb = a.trajectory("twice"), b.trajectory("twice", summary=False)
    ta.start()
    tb.start()
    assert a.call("create", {"name": "y"}, trajectory=ta) == {"id": "y"}
    assert b.call("remove", {"item_id": "y"}, trajectory=tb) == {"removed": "y"}
    # a's first finish again, as the resend of a finish whose answer was lost writes it
    log = redis.Redis.from_url(redis_url, decode_responses=True)
    key = a.store.keys("twice")[1]
    first = next(e for e in log.lrange(key, 0, -1) if e[0] == "p")
    log.rpush(key, first)
    log.hincrby(a.store.keys("twice")[0], "ln", 1)
    other = tg.Guard(store=redis_url).trajectory("twice", summary=False)
    other.start()
    seen = other.lookup("item", "y")
    assert seen is not None and not seen.live
    tb.sync()
    mine = tb.lookup("item", "y")
    assert mine is not None and not mine.live
    ta.end()
    tb.end()


def test_a_call_that_closes_after_its_trajectory_ended_here_is_not_waited_for(
    redis_url: str,
) -> None:
    """A's trajectory ends (its summary claimed) while A's call is open; B goes on with the
    trajectory and uses what that call produced: allowed, without waiting for a finish that
    never comes (the call closes after the end)."""
    holds = events()
    a = holding_guard(redis_url, holds)
    b = holding_guard(redis_url, holds)
    ta, tb = a.trajectory("late"), b.trajectory("late", summary=False)
    ta.start()
    tb.start()
    t1, made = in_thread(a.call, "create", {"name": "z"}, trajectory=ta)
    assert holds["create"][0].wait(60)  # step 1 taken, pending
    ta.end()
    holds["create"][1].set()
    t1.join(60)
    assert made == [{"id": "z"}]
    meta = redis.Redis.from_url(redis_url, decode_responses=True).hgetall(a.store.keys("late")[0])
    assert not [k for k in meta if k.startswith("p:")]  # nobody is to wait for step 1
    assert b.call("use", {"item_id": "z"}, trajectory=tb) == "z"
    tb.end()
