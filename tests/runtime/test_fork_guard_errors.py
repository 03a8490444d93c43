"""A failing fork is a guard error, handled as one (toolguard/runtime/calls/transaction.py).

An undo log that meets what it cannot record, while being set up or while the call runs,
leaves every object as it was; the call is never reported as the environment's rejection:
the guard-error policy decides (fail closed blocks in block mode and records the failure in
log mode, fail open runs the call as if no dry run were configured), and the span says
``dry_run=guard_error``. A tool that catches the journal's error changes none of this.
"""

from __future__ import annotations

import array
import random
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from state_graphs import Obj, build, nodes, run, shape

import toolguard as tg
from toolguard.runtime.forks.undolog import Journal

if TYPE_CHECKING:
    from conftest import Telemetry

PROGRAMS = st.lists(
    st.tuples(st.integers(0, 7), st.integers(0, 30), st.integers(-3, 3)), max_size=6
)


def untrackable() -> array.array[int]:
    return array.array("i", [1])  # neither a __dict__ nor slots


def with_untrackable(seed: int, where: int) -> Any:
    """A random graph with an untrackable value put into one of its objects or dicts."""
    root = build(seed)
    places = [n for n in nodes(root) if isinstance(n, Obj | dict)]
    place = places[where % len(places)]
    if isinstance(place, dict):
        place["untrackable"] = untrackable()
    else:
        place.untrackable = untrackable()
    return root


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    where=st.integers(0, 20),
    program=PROGRAMS,
    mode=st.sampled_from(["block", "log"]),
    policy=st.sampled_from(["fail_closed", "fail_open"]),
)
def test_whatever_fails_every_object_is_left_as_it_was_and_the_policy_decides(
    seed: int, where: int, program: list[tuple[int, int, int]], mode: str, policy: str
) -> None:
    root = with_untrackable(seed, where)
    before_shape, before_nodes = shape(root), nodes(root)
    before_types = [type(n) for n in before_nodes]
    plain = with_untrackable(seed, where)
    run(plain, program)
    guard = tg.Guard(state=root, dry_run=tg.UndoLogFork(), mode=mode, on_guard_error=policy)
    runs: list[int] = []

    @guard.tool
    def change(state: Annotated[Any, tg.State]) -> str:
        runs.append(1)
        nodes(state)  # reads every attribute: the untrackable one too, if it was not yet met
        run(state, program)
        return "done"

    out = guard.call("change", {})
    if mode == "block" and policy == "fail_closed":
        assert isinstance(out, tg.Rejection) and out.check == "state.dry_run"
        assert "guard error" in out.message and "ForkError" in out.message
        assert shape(root) == before_shape
        assert all(a is b for a, b in zip(nodes(root), before_nodes, strict=True))
        assert [type(n) for n in before_nodes] == before_types  # no stand-in left
        assert len(runs) <= 1  # never run, or tried once and undone
    else:  # rolled back, then run once as if no dry run were configured
        assert out == "done" and 1 <= len(runs) <= 2  # maybe tried first, then run
        assert shape(root) == shape(plain)


def test_a_failed_set_up_leaves_no_stand_in_for_later_dry_runs() -> None:
    lazy = Obj()
    lazy.items = [1]  # not only plain values: entered under a stand-in
    state = {"first": lazy, "then": untrackable()}
    with pytest.raises(tg.ForkError, match="array"):
        Journal().track(state)
    assert type(lazy) is Obj
    del state["then"]
    journal = Journal()
    assert journal.track(state)  # the object is free for the next dry run
    journal.rollback()


class Vault:
    """A state whose tool reaches something the undo log cannot record only mid-call."""

    def __init__(self) -> None:
        self.rows: dict[str, Any] = {"n": 1, "nested": {"lock": untrackable()}}


def vault_tool(guard: tg.Guard, runs: list[int], *, swallow: bool) -> None:
    @guard.tool
    def bump(state: Annotated[Vault, tg.State]) -> dict[str, Any]:
        runs.append(1)  # counted outside the state, so outside the journal
        try:
            state.rows["n"] += 1
            _ = state.rows["nested"]["lock"]
        except tg.ForkError:
            if not swallow:
                raise
            return {"error": "swallowed"}  # what a broad except in a tool would do
        return {"n": state.rows["n"]}


@pytest.mark.parametrize("swallow", [False, True])
@pytest.mark.parametrize(
    ("mode", "policy"), [("block", "fail_closed"), ("block", "fail_open"), ("log", "fail_closed")]
)
def test_a_journal_that_fails_during_the_call_is_a_guard_error(
    otel: Telemetry, mode: str, policy: str, swallow: bool
) -> None:
    vault = Vault()
    guard = otel.guard(
        state=vault,
        dry_run=tg.UndoLogFork(),
        mode=mode,
        on_guard_error=policy,
        error_result=lambda r: isinstance(r, dict) and "error" in r,
    )
    runs: list[int] = []
    vault_tool(guard, runs, swallow=swallow)
    out = guard.call("bump", {})
    span = otel.only_call()
    assert span.attributes["toolguard.dry_run"] == "guard_error"
    if mode == "block" and policy == "fail_closed":
        assert isinstance(out, tg.Rejection)
        assert out.check == "state.dry_run" and "guard error" in out.message
        assert "rejected by the environment" not in out.model_message
        assert vault.rows["n"] == 1 and len(runs) == 1  # tried once, undone
    else:  # run as if no dry run were configured: the tool's plain outcome
        assert len(runs) == 2 and vault.rows["n"] == 2
        assert out == {"n": 2}  # the plain run meets no journal
        if mode == "log":
            assert span.attributes["toolguard.valid"] is False
            assert span.attributes["toolguard.check"] == "state.dry_run"


class Point(NamedTuple):
    xs: list[int]
    tags: set[str]


def test_tuples_and_namedtuples_holding_containers_are_journaled() -> None:
    point = Point([1], {"a"})
    state = {"point": point, "pair": ([1, 2], {"k": [3]})}
    guard = tg.Guard(state=state, dry_run=tg.UndoLogFork())

    @guard.tool
    def grow(fail: bool, db: Annotated[dict[str, Any], tg.State]) -> str:
        db["point"].xs.append(random.randint(5, 9))
        db["point"].tags.add("b")
        db["pair"][1]["k"].append(4)
        if fail:
            raise ValueError("no")
        return "grown"

    assert isinstance(guard.call("grow", {"fail": True}), tg.Rejection)
    assert state["point"] is point and point.xs == [1] and point.tags == {"a"}
    assert state["pair"][1] == {"k": [3]}
    assert guard.call("grow", {"fail": False}) == "grown"  # a valid call is not blocked
    assert len(point.xs) == 2 and state["pair"][1]["k"] == [3, 4]
