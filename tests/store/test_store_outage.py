"""Redis stopped or hung mid-run: the guard's on_guard_error decides. Failing closed (the
default) blocks the call with a message naming the store; failing open runs it and logs;
nothing hangs (every round trip has a timeout) and nothing is silently dropped."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from redis_server import RedisServer

import toolguard as tg
from benchmarks.store import item_guard
from toolguard.runtime.trajectories.shared import STORE_CHECK


def call_in_thread(guard: tg.Guard, *args: Any, **kw: Any) -> Any:
    """The call's answer; a call that hung would leave the thread alive (failing the test)."""
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(guard.call(*args, **kw)), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the call hung on an unreachable store"
    return out[0]


def test_stopped_store_fails_closed(redis_server: RedisServer, caplog) -> None:
    guard = item_guard(redis_server.url)
    traj = guard.trajectory("outage")
    traj.start()
    assert guard.call("create", {"name": "a"}, trajectory=traj) == {"id": "a"}
    redis_server.stop()
    with caplog.at_level(logging.ERROR, logger="toolguard"):
        answer = call_in_thread(guard, "use", {"item_id": "a"}, trajectory=traj)
    assert isinstance(answer, tg.Rejection)
    assert (answer.decision, answer.cause, answer.check) == ("blocked", "dependency", STORE_CHECK)
    assert redis_server.url in answer.message and "fail closed" in answer.message
    assert "trajectory store is unavailable" in str(answer)
    assert any(
        "failing closed" in r.getMessage() and "'outage'" in r.getMessage() for r in caplog.records
    )
    # Its summary cannot be claimed while the store is down: said, with the trajectory id.
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="toolguard"):
        traj.end()
    assert any(
        "'outage'" in r.getMessage() and "could not be claimed" in r.getMessage()
        for r in caplog.records
    )


def test_hung_store_times_out_then_recovers(redis_server: RedisServer) -> None:
    guard = item_guard(redis_server.url)
    traj = guard.trajectory("hung")
    traj.start()
    redis_server.pause()  # accepts nothing, answers nothing: a round trip times out
    try:
        answer = call_in_thread(guard, "create", {"name": "b"}, trajectory=traj)
    finally:
        redis_server.resume()
    assert isinstance(answer, tg.Rejection) and answer.check == STORE_CHECK
    # Back: calls are checked against the shared record again.
    assert guard.call("create", {"name": "c"}, trajectory=traj) == {"id": "c"}
    other = item_guard(redis_server.url).trajectory("hung", summary=False)
    other.start()
    assert other.live_values("item") == ["c"]  # the blocked call bound nothing
    # T counts the blocked call; FED is its step (fail closed: it was not valid).
    assert (other.length, other.first_error_depth, other.first_error_cause) == (2, 1, "dependency")


def test_fail_open_runs_the_call_and_logs(redis_server: RedisServer, caplog) -> None:
    guard = item_guard(redis_server.url, on_guard_error="fail_open")
    traj = guard.trajectory("open")
    traj.start()
    assert guard.call("create", {"name": "d"}, trajectory=traj) == {"id": "d"}
    redis_server.stop()
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        # Checked against what this process last knew: "d" is a live item here.
        assert call_in_thread(guard, "use", {"item_id": "d"}, trajectory=traj) == "d"
        assert call_in_thread(guard, "create", {"name": "e"}, trajectory=traj) == {"id": "e"}
    messages = [r.getMessage() for r in caplog.records]
    assert any("failing open" in m and redis_server.url in m for m in messages)
    # What could not be written is kept and sent with the next round trip that works.
    assert any("kept here and sent with the next round trip" in m for m in messages)
    redis_server.start()  # an empty server on the same port (nothing persisted)
    assert guard.call("create", {"name": "f"}, trajectory=traj) == {"id": "f"}
    other = item_guard(redis_server.url).trajectory("open", summary=False)
    other.start()
    # The empty server had forgotten the record: started again from what this process knows,
    # "d" (bound before the outage) included (test_store_forgotten.py).
    assert set(other.live_values("item")) == {"d", "e", "f"}


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0"])
def test_unreachable_at_start_blocks_not_crashes(url: str) -> None:
    guard = item_guard(url)
    with guard.trajectory("never") as traj:
        answer = call_in_thread(guard, "create", {"name": "x"}, trajectory=traj)
    assert isinstance(answer, tg.Rejection) and answer.check == STORE_CHECK
