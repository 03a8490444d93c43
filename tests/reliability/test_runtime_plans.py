"""verify_plan under hostile plans: arguments nested at any depth, cycles."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolguard as tg

LEAVES = {
    "literal": "leaf",
    "reference": {"$step": 0},
    "malformed reference": {"$step": 0, "bogus": 1},
    "reference to a later step": {"$step": 5},
}


def planning_guard() -> tg.Guard:
    guard = tg.Guard(state={"n": 0})

    @guard.tool
    def echo(x: object) -> object:
        return x

    @guard.tool(grounded=["x"])
    def grounded(x: object) -> int:
        return 1

    @guard.tool(dry_run=tg.DeepCopyFork())
    def forked(x: object, state: Annotated[dict[str, int], tg.State]) -> int:
        return 1

    return guard


def nested(depth: int, mapping: bool, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value} if mapping else [value]
    return value


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    depth=st.integers(1, 6000),
    mapping=st.booleans(),
    leaf=st.sampled_from(sorted(LEAVES)),
    tool=st.sampled_from(["echo", "grounded", "forked"]),
    dry_run=st.sampled_from([None, True, False]),
    awaited=st.booleans(),
)
def test_arguments_nested_at_any_depth_get_a_verdict(
    depth: int, mapping: bool, leaf: str, tool: str, dry_run: bool | None, awaited: bool
) -> None:
    guard = planning_guard()
    plan = [
        {"tool": "echo", "arguments": {"x": 1}},
        {"tool": tool, "arguments": {"x": nested(depth, mapping, LEAVES[leaf])}},
    ]
    with guard.trajectory("t"):
        if awaited:
            verdict = asyncio.run(guard.averify_plan(plan, dry_run=dry_run))
        else:
            verdict = guard.verify_plan(plan, dry_run=dry_run)
    assert isinstance(verdict, tg.PlanVerdict)
    if leaf == "malformed reference":
        assert verdict.failed == 1 and verdict.check == "schema.plan"
    if leaf == "reference to a later step":
        assert verdict.failed == 1 and verdict.cause == "dependency"
    if not verdict.ok:
        assert len(verdict.message or "") <= 2001


def test_an_argument_holding_itself_is_a_malformed_plan() -> None:
    loop: list[Any] = []
    loop.append({"again": loop})
    verdict = planning_guard().verify_plan([{"tool": "echo", "arguments": {"x": loop}}])
    assert verdict.failed == 0 and verdict.check == "schema.plan"
    assert "`x.0.again` holds itself" in (verdict.message or "")
