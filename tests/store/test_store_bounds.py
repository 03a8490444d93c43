"""What the store bounds: the seen values of a trajectory (``seen_limit`` bytes), past which
what a process sees stays in that process (said once in its log); bindings never."""

from __future__ import annotations

import logging

import toolguard as tg
from toolguard.runtime.trajectories.redis_store import RedisStore

FIRST, SECOND = "a" * 150, "b" * 150  # each about 170 bytes in the store: one fits in 200


def bounded_guard(url: str) -> tg.Guard:
    guard = tg.Guard(store=RedisStore(url, seen_limit=200))

    @guard.tool(grounded=["text"])
    def say(text: str) -> str:
        return text

    @guard.tool(produces={"id": "item"})
    def create(name: str) -> dict[str, str]:
        return {"id": name}

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id

    return guard


def test_seen_values_past_the_bound_stay_in_their_process(redis_url: str, caplog) -> None:
    a, b = bounded_guard(redis_url), bounded_guard(redis_url)
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        ta = a.trajectory("bounded", user_input=[FIRST, SECOND])
        ta.start()
        created = [a.call("create", {"name": f"n{i}" * 40}, trajectory=ta) for i in range(3)]
    assert all(not isinstance(c, tg.Rejection) for c in created)
    dropped = [r.getMessage() for r in caplog.records if "keeps no more" in r.getMessage()]
    assert len(dropped) == 1 and "'bounded'" in dropped[0]  # said once, with the trajectory
    tb = b.trajectory("bounded", summary=False)
    tb.start()
    assert b.call("say", {"text": FIRST}, trajectory=tb) == FIRST  # within the bound: shared
    refused = b.call("say", {"text": SECOND}, trajectory=tb)
    assert isinstance(refused, tg.Rejection) and refused.cause == "information"
    assert a.call("say", {"text": SECOND}, trajectory=ta) == SECOND  # its own process saw it
    # bindings are never dropped: every id made past the bound is usable in the other process
    for i in range(3):
        assert b.call("use", {"item_id": f"n{i}" * 40}, trajectory=tb) == f"n{i}" * 40
    tb.end()
    ta.end()
