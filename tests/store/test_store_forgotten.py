"""A record the store forgot while a process still holds its trajectory (the keys' idle
expiry, a server restarted empty): the process starts it again from what it knows, so steps
go on after the ones it took (none is taken twice), its bindings and what it has seen reach
the others again, and the summary counts every call. The expiry is what deleting the keys
does (never a sleep)."""

from __future__ import annotations

import logging

import redis
from redis_server import RedisServer

import toolguard as tg
from benchmarks.store import item_guard
from toolguard.runtime.trajectories.redis_store import RedisStore


def forget(url: str, traj_id: str) -> None:
    """What the keys' idle expiry does: the record is gone."""
    keys = RedisStore(url).keys(traj_id)
    assert redis.Redis.from_url(url).delete(*keys) >= 1


def steps(traj: tg.Trajectory) -> list[int]:
    return [v.step for v in traj.verdicts]


def test_a_forgotten_record_is_started_again_from_what_the_process_knows(
    redis_server: RedisServer, caplog
) -> None:
    a = item_guard(redis_server.url)
    ta = a.trajectory("forgotten", summary=False)
    ta.start()
    assert a.call("create", {"name": "x"}, trajectory=ta) == {"id": "x"}
    assert a.call("use", {"item_id": "x"}, trajectory=ta) == "x"
    forget(redis_server.url, "forgotten")
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        assert a.call("use", {"item_id": "x"}, trajectory=ta) == "x"
    assert any(
        "'forgotten'" in r.getMessage() and "had forgotten its record" in r.getMessage()
        for r in caplog.records
    )
    # A process that comes after finds A's binding, and steps go on after A's.
    b = item_guard(redis_server.url)
    tb = b.trajectory("forgotten", summary=False)
    tb.start()
    assert b.call("use", {"item_id": "x"}, trajectory=tb) == "x"
    assert (steps(ta), steps(tb)) == ([1, 2, 3], [4])
    assert tb.length == 4


def test_the_first_failure_and_what_was_seen_come_back_too(redis_server: RedisServer) -> None:
    a = item_guard(redis_server.url)
    ta = a.trajectory("forgotten-fed", summary=False, user_input="make one called seen-value")
    ta.start()
    assert a.call("create", {"name": "x"}, trajectory=ta) == {"id": "x"}
    assert isinstance(a.call("use", {"item_id": "nope"}, trajectory=ta), tg.Rejection)  # FED 2
    forget(redis_server.url, "forgotten-fed")
    assert a.call("create", {"name": "y"}, trajectory=ta) == {"id": "y"}
    other = item_guard(redis_server.url).trajectory("forgotten-fed", summary=False)
    other.start()
    assert (other.length, other.first_error_depth, other.first_error_cause) == (3, 2, "dependency")
    assert set(other.live_values("item")) == {"x", "y"}
    assert other.has_seen("seen-value")


def test_a_process_that_comes_first_after_the_store_forgot_does_not_restart_the_holders_steps(
    redis_server: RedisServer,
) -> None:
    a = item_guard(redis_server.url)
    ta = a.trajectory("forgotten-late", summary=False)
    ta.start()
    a.call("create", {"name": "x"}, trajectory=ta)
    a.call("create", {"name": "y"}, trajectory=ta)
    forget(redis_server.url, "forgotten-late")
    b = item_guard(redis_server.url)
    tb = b.trajectory("forgotten-late", summary=False)
    tb.start()
    b.call("create", {"name": "z"}, trajectory=tb)  # a new record: B knows of no other step
    assert a.call("use", {"item_id": "z"}, trajectory=ta) == "z"  # A reads the new record
    assert steps(ta) == [1, 2, 3]  # A's steps go on after its own
    assert b.call("use", {"item_id": "x"}, trajectory=tb) == "x"  # and A's bindings are back
    assert steps(tb)[-1] == 4
