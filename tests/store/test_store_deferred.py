"""A call's finish is posted (written before the call returns, its answer read later), so
another process may check its next call before that finish lands. These tests hold a call
between its begin and its finish with an event (never with timing) and check that the other
process waits for it in Redis (a blocking read) instead of blocking a legal call, or
letting a stale one through; and that a posted finish's failure is logged and resent."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import redis
from redis_server import RedisServer

import toolguard as tg
from toolguard.runtime.trajectories.redis_store import RedisStore

WORKER = str(Path(__file__).with_name("store_worker.py"))


def held_guard(url: str, started: threading.Event, release: threading.Event) -> tg.Guard:
    """``create`` and ``remove`` that hold between their begin and their finish until
    ``release`` is set (``started`` says the step was taken); ``use`` refers to an item."""
    guard = tg.Guard(store=RedisStore(url, timeout=30))

    @guard.tool(produces={"id": "item"})
    def create(name: str) -> dict[str, str]:
        started.set()
        assert release.wait(60)
        return {"id": name}

    @guard.tool(refs={"item_id": "item"}, invalidates={"item_id": "item"})
    def remove(item_id: str) -> dict[str, str]:
        started.set()
        assert release.wait(60)
        return {"removed": item_id}

    @guard.tool(produces={"id": "item"})
    def broken(name: str) -> dict[str, str]:
        started.set()
        assert release.wait(60)
        raise RuntimeError("the backend refused")

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id

    return guard


def _live(binding: Any) -> bool:
    return binding is not None and binding.live


def in_thread(fn: Any, *args: Any, **kw: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn(*args, **kw)), daemon=True)
    t.start()
    return t, out


def blocked_in_redis(url: str) -> None:
    """Until a client of ``url`` is blocked in a read (``XREAD``): the waiter is waiting."""
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any("b" in c["flags"] and c["cmd"] == "xread" for c in client.client_list()):
            return
        time.sleep(0.01)
    raise AssertionError("no client blocked waiting for a finish")


def test_a_legal_call_waits_for_the_binding_in_flight(redis_url: str) -> None:
    started, release = threading.Event(), threading.Event()
    a, b = held_guard(redis_url, started, release), held_guard(redis_url, started, release)
    ta, tb = a.trajectory("held"), b.trajectory("held", summary=False)
    ta.start()
    tb.start()
    t1, made = in_thread(a.call, "create", {"name": "x"}, trajectory=ta)
    assert started.wait(60)  # step 1 taken and pending: "x" is not bound yet
    t2, used = in_thread(b.call, "use", {"item_id": "x"}, trajectory=tb)
    blocked_in_redis(redis_url)  # b's check failed with step 1 pending: it waits for it
    release.set()
    t1.join(60)
    t2.join(60)
    assert made == [{"id": "x"}]
    assert used == ["x"]  # checked again once step 1's finish landed: allowed
    assert [(v.step, v.decision) for v in tb.verdicts] == [(2, "allowed")]
    tb.end()
    ta.end()


def test_a_stale_reference_waits_for_the_invalidation_in_flight(redis_url: str) -> None:
    started, release = threading.Event(), threading.Event()
    a, b = held_guard(redis_url, started, release), held_guard(redis_url, started, release)
    ta, tb = a.trajectory("stale"), b.trajectory("stale", summary=False)
    ta.start()
    tb.start()
    ta.bind("item", "x")
    t1, removed = in_thread(a.call, "remove", {"item_id": "x"}, trajectory=ta)
    assert started.wait(60)  # step 1 (it may invalidate "x") taken and pending
    t2, used = in_thread(b.call, "use", {"item_id": "x"}, trajectory=tb)
    blocked_in_redis(redis_url)  # "x" is live in b's replica, but step 1 may invalidate it
    release.set()
    t1.join(60)
    t2.join(60)
    assert removed == [{"removed": "x"}]
    assert isinstance(used[0], tg.Rejection) and "stale" in used[0].message
    tb.end()
    ta.end()


def test_the_summary_waits_for_a_failure_in_flight(redis_url: str, otel) -> None:
    started, release = threading.Event(), threading.Event()
    a = held_guard(redis_url, started, release)
    b = tg.Guard(store=RedisStore(redis_url, timeout=30), tracer_provider=otel.provider)
    ta, tb = a.trajectory("fed", summary=False), b.trajectory("fed")
    ta.start()
    tb.start()
    # step 1 fails (the tool raises), its failure sent with its finish: held before that;
    # a summary claimed without it would say FED 2 (T + 1)
    t1, failed = in_thread(a.call, "broken", {"name": "z"}, trajectory=ta)
    assert started.wait(60)
    t2, _ = in_thread(tb.end)  # b claims the summary: it waits for step 1 to land
    blocked_in_redis(redis_url)
    release.set()
    t1.join(60)
    t2.join(60)
    assert isinstance(failed[0], tg.Rejection)
    summary = otel.summary("fed")
    assert summary.attributes["toolguard.trajectory.length"] == 1
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 1
    assert summary.attributes["toolguard.trajectory.first_error.cause"] == "state_consistency"
    ta.end()


def test_a_call_gives_up_waiting_after_the_store_timeout(redis_url: str, caplog) -> None:
    started, release = threading.Event(), threading.Event()
    a = held_guard(redis_url, started, release)
    b = tg.Guard(store=RedisStore(redis_url, timeout=1.0))  # its wait: 1 s, once
    b.tool(refs={"item_id": "item"})(lambda item_id: item_id)
    ta, tb = a.trajectory("gone"), b.trajectory("gone", summary=False)
    ta.start()
    tb.start()
    t1, _ = in_thread(a.call, "create", {"name": "z"}, trajectory=ta)
    assert started.wait(60)
    try:
        with caplog.at_level(logging.WARNING, logger="toolguard"):
            answer = b.call("<lambda>", {"item_id": "z"}, trajectory=tb)
            # the step it waited for in vain is not waited for again
            again = b.call("<lambda>", {"item_id": "z"}, trajectory=tb)
    finally:
        release.set()
        t1.join(60)
    assert isinstance(answer, tg.Rejection) and isinstance(again, tg.Rejection)
    gave_up = [r for r in caplog.records if "did not finish within" in r.getMessage()]
    assert len(gave_up) == 1 and "'gone'" in gave_up[0].getMessage()
    # The call that waited in vain is not blamed on the agent: "z" may be on its way (the
    # held create binds it), so the store's guard error stands, telling the model to retry.
    assert answer.check == "dependency.trajectory_store", answer
    assert "guard error" in answer.message and "again in a moment" in answer.model_message
    # The next call did not wait (the step is abandoned): checked on what is known, as ever.
    assert again.check == "dependency.item_id", again
    tb.end()
    ta.end()


def test_a_wait_in_vain_fails_open_when_the_guard_does(redis_url: str, caplog) -> None:
    started, release = threading.Event(), threading.Event()
    a = held_guard(redis_url, started, release)
    b = tg.Guard(store=RedisStore(redis_url, timeout=1.0), on_guard_error="fail_open")
    b.tool(refs={"item_id": "item"})(lambda item_id: item_id)
    ta, tb = a.trajectory("open", summary=False), b.trajectory("open", summary=False)
    ta.start()
    tb.start()
    t1, _ = in_thread(a.call, "create", {"name": "z"}, trajectory=ta)
    assert started.wait(60)
    try:
        with caplog.at_level(logging.WARNING, logger="toolguard"):
            answer = b.call("<lambda>", {"item_id": "z"}, trajectory=tb)
    finally:
        release.set()
        t1.join(60)
    assert answer == "z"  # failing open: the value not found is not held against the call
    assert any("failing open" in r.getMessage() for r in caplog.records)
    # once the create has landed (its finish is posted: B polls the record until it is
    # there, as no process orders another's round trips), the same call passes on it
    deadline = time.monotonic() + 60
    while not _live(tb.lookup("item", "z")) and time.monotonic() < deadline:
        tb.sync()
        time.sleep(0.01)
    assert b.call("<lambda>", {"item_id": "z"}, trajectory=tb) == "z"
    tb.end()
    ta.end()


def test_one_process_signals_the_next_right_after_its_call(redis_url: str) -> None:
    """Process A makes a call that binds an id and at once tells process B (a pipe), which
    uses it: every use is allowed, whichever of A's finish and B's begin Redis runs first."""
    n = 150
    a = subprocess.Popen(
        [sys.executable, WORKER, "relay", "make", redis_url, "relayed", str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    b = subprocess.Popen(
        [sys.executable, WORKER, "relay", "use", redis_url, "relayed", str(n)],
        stdin=a.stdout,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert a.stdout is not None
    a.stdout.close()  # b holds the pipe now
    out, err = b.communicate(timeout=300)
    a.wait(300)
    assert a.returncode == 0, a.stderr.read() if a.stderr else ""
    assert b.returncode == 0, err
    verdicts = json.loads(out.strip().splitlines()[-1])["verdicts"]
    assert len(verdicts) == n
    assert [d for _, d, _ in verdicts] == ["allowed"] * n


def test_a_posted_finish_that_fails_is_logged_and_sent_again(
    redis_server: RedisServer, caplog
) -> None:
    guard = tg.Guard(store=redis_server.url)

    @guard.tool(produces={"id": "item"})
    def create(name: str) -> dict[str, str]:
        redis_server.stop()  # the step was taken; the finish goes to a store that is gone
        return {"id": name}

    traj = guard.trajectory("lost")
    traj.start()
    # the result returns: its finish was posted, not answered
    assert guard.call("create", {"name": "g"}, trajectory=traj) == {"id": "g"}
    redis_server.start()  # an empty server on the same port (nothing persisted)
    with caplog.at_level(logging.ERROR, logger="toolguard"):
        traj.sync()  # reads the posted finish's answer on its dead connection: the error
        traj.sync()  # the finish's events, sent again
    lost = [r.getMessage() for r in caplog.records if "recording step 1" in r.getMessage()]
    assert lost and "'lost'" in lost[0] and "sent with the next round trip" in lost[0]
    other = tg.Guard(store=redis_server.url).trajectory("lost", summary=False)
    other.start()
    assert other.live_values("item") == ["g"]
    meta = redis.Redis.from_url(redis_server.url, decode_responses=True).hgetall(
        guard.store.keys("lost")[0]
    )
    assert not [k for k in meta if k.startswith("p:")]  # step 1 is pending no more
    traj.end()
