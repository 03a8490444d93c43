"""A checked call costs one round trip to check and one to finish, counted on the wire (a
connection class that counts what it sends); the finish is posted, so the call waits for
one of them (the store still owes the other's answer when the call returns); and the
record keeps what the issue lists."""

from __future__ import annotations

import redis
from redis.connection import Connection

import toolguard as tg
from toolguard.runtime.trajectories.redis_store import RedisStore


class CountingConnection(Connection):
    sent = 0

    def send_packed_command(self, command, check_health=True):  # type: ignore[no-untyped-def]
        CountingConnection.sent += 1
        return super().send_packed_command(command, check_health)


def counting_store(url: str, **options) -> RedisStore:
    pool = redis.ConnectionPool.from_url(
        url, connection_class=CountingConnection, decode_responses=True, socket_timeout=2
    )
    return RedisStore(url, client=redis.Redis(connection_pool=pool), **options)


def contacts(store: RedisStore) -> tg.Guard:
    guard = tg.Guard(store=store)

    @guard.tool(produces={"id": "contact_id"})
    def search(phone: str) -> list[dict[str, str]]:
        return [{"id": "id_8923", "phone": phone}]

    @guard.tool(refs={"contact_id": "contact_id"}, invalidates={"contact_id": "contact_id"})
    def remove(contact_id: str) -> dict[str, str]:
        return {"removed": contact_id}

    @guard.tool(grounded=["text"])
    def say(text: str) -> str:
        return text

    return guard


def test_a_call_is_two_round_trips_and_waits_for_one(redis_url: str) -> None:
    store = counting_store(redis_url)
    guard = contacts(store)
    with guard.trajectory("rt", user_input="please tell Alex hello") as traj:
        guard.call("search", {"phone": "1"}, trajectory=traj)  # a connection: scripts loaded
        guard.call("remove", {"contact_id": "id_8923"}, trajectory=traj)
        counts, owed = [], []
        for call in [
            ("search", {"phone": "2"}),
            ("remove", {"contact_id": "id_8923"}),  # stale now: blocked, still 2 trips
            ("say", {"text": "Alex"}),
            ("remove", {"contact_id": "nope"}),
        ]:
            before = CountingConnection.sent
            guard.call(*call, trajectory=traj)
            counts.append(CountingConnection.sent - before)
            owed.append(store.lanes.owed())
        assert counts == [2, 2, 2, 2]
        # Each returned before its finish was answered: one round trip waited for, not two.
        assert owed == [1, 1, 1, 1]
        pending = guard.check("search", {"phone": "3"}, trajectory=traj)
        before = CountingConnection.sent
        pending.finish([{"id": "id_1"}])
        assert CountingConnection.sent - before == 1  # the finish alone, posted
        assert store.lanes.owed() == 1


def test_a_failing_call_that_writes_nothing_waits_for_its_finish(redis_url: str) -> None:
    """No pending step tells the other processes to wait for its failure, so it is sent and
    answered before the call returns: FED is right wherever the summary is written."""
    store = counting_store(redis_url)
    guard = tg.Guard(store=store)

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id

    with guard.trajectory("failing") as traj:
        traj.bind("item", "a")
        use(item_id="a")  # a connection: scripts loaded
        before = CountingConnection.sent
        assert isinstance(guard.call("use", {"item_id": "b"}, trajectory=traj), tg.Rejection)
        assert CountingConnection.sent - before == 2
        assert store.lanes.owed() == 0


def test_the_record_is_shared(redis_url: str) -> None:
    one, two = contacts(counting_store(redis_url)), contacts(counting_store(redis_url))
    a = one.trajectory("shared", labels={"model": "m"}, user_input="say hi to Alex")
    a.start()
    b = two.trajectory("shared", labels={"task": "t"}, summary=False)
    b.start()
    # user input seen in one is grounding in the other; bindings and invalidations cross.
    assert two.call("say", {"text": "Alex"}, trajectory=b) == "Alex"
    assert isinstance(two.call("say", {"text": "Bob"}, trajectory=b), tg.Rejection)
    one.call("search", {"phone": "1"}, trajectory=a)
    assert two.call("remove", {"contact_id": "id_8923"}, trajectory=b) == {"removed": "id_8923"}
    stale = one.call("remove", {"contact_id": "id_8923"}, trajectory=a)
    assert isinstance(stale, tg.Rejection) and "stale" in stale.message
    assert "remove at step 4" in stale.message  # who invalidated it, in the other process
    # steps reserved by call id in one process are taken by the call in the other
    assert a.reserve(["c1", "c2"]) == [6, 7]
    assert b.reserve(["c2"]) == [7]
    assert two.check("search", {"phone": "9"}, call_id="c2", trajectory=b).step == 7
    assert one.check("search", {"phone": "9"}, call_id="c1", trajectory=a).step == 6
    # first failure (step 2, information) and T from the shared record, whoever asks
    b.sync()
    assert (a.length, b.length) == (7, 7)
    assert (b.first_error_depth, b.first_error_cause) == (2, "information")
    a.success = True
    b.end()  # summary=False: writes none, claims nothing
    a.end()
    assert a.labels == {"model": "m", "task": "t"}  # both processes' labels in the summary
    assert a.success is True


def test_one_summary_whoever_ends_first(redis_url: str, otel) -> None:
    stores = [counting_store(redis_url) for _ in range(3)]
    guards = [tg.Guard(store=s, tracer_provider=otel.provider) for s in stores]
    for g in guards:
        g.tool(produces={"id": "x"})(lambda n: {"id": n})
    trajs = [g.trajectory("once", labels={"who": str(i)}) for i, g in enumerate(guards)]
    for i, (g, t) in enumerate(zip(guards, trajs, strict=True)):
        t.start()
        g.call("<lambda>", {"n": i}, trajectory=t)
    for t in trajs:
        t.end()
    summary = otel.summary("once")  # exactly one, from the first to end
    assert summary.attributes["toolguard.trajectory.length"] == 3
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 4
    assert len(otel.call_spans("once")) == 3
    assert sorted(s.attributes["toolguard.step"] for s in otel.call_spans("once")) == [1, 2, 3]


def test_a_valid_call_with_nothing_to_write_is_one_round_trip(redis_url: str) -> None:
    guard = tg.Guard(store=counting_store(redis_url))  # no grounded tool: outputs not observed

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id

    with guard.trajectory("one") as traj:
        traj.bind("item", "a")
        use(item_id="a")  # loads the begin script
        before = CountingConnection.sent
        for _ in range(10):
            use(item_id="a")
        assert CountingConnection.sent - before == 10
