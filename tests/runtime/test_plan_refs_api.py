"""``tg.plan_refs`` and ``tg.resolve_plan_refs``: executing a verified plan, step by step."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import toolguard as tg

ARGS = {"contact_id": {"$step": 0, "path": "0.id"}, "note": ["keep", tg.StepRef("found")]}


@dataclass
class Contact:
    id: str


def test_plan_refs_lists_each_reference_at_any_depth_in_order() -> None:
    assert tg.plan_refs(ARGS) == [tg.StepRef(0, "0.id"), tg.StepRef("found")]
    assert tg.plan_refs({"x": 1}) == []


def test_resolve_replaces_each_reference_by_the_real_result() -> None:
    results = {0: [{"id": "c1"}], "found": Contact("c2")}
    assert tg.resolve_plan_refs(ARGS, results) == {
        "contact_id": "c1",
        "note": ["keep", Contact("c2")],
    }
    # By index, the way a loop that appends each result keeps them.
    args = {"contact_id": {"$step": 1, "path": "id"}, "literal": {"a": 1}}
    assert tg.resolve_plan_refs(args, ["first", Contact("c3")]) == {
        "contact_id": "c3",
        "literal": {"a": 1},
    }
    assert ARGS["contact_id"] == {"$step": 0, "path": "0.id"}  # the plan is left as it was


@pytest.mark.parametrize(
    ("args", "results", "says"),
    [
        ({"c": {"$step": 0, "path": "0.id"}}, [[]], "a list of 0 items: no item 0"),
        ({"c": {"$step": 0, "path": "name"}}, [{"id": 1}], "has no key 'name'"),
        ({"c": {"$step": 2}}, ["r0"], "step 2 has no result"),
        ({"c": {"$step": "found"}}, ["r0"], "pass the results as a mapping keyed by step id"),
        ({"c": {"$step": 0, "pth": "id"}}, ["r0"], "unknown keys pth"),
    ],
)
def test_a_reference_that_names_nothing_says_why(args, results, says) -> None:
    with pytest.raises(tg.PlanRefError, match=r"`arguments\.c`") as info:
        tg.resolve_plan_refs(args, results)
    assert says in str(info.value)
    assert isinstance(info.value, tg.ToolGuardError) and isinstance(info.value, ValueError)


def test_arguments_must_be_a_mapping() -> None:
    with pytest.raises(tg.UsageError, match="not list"):
        tg.plan_refs([{"$step": 0}])  # type: ignore[arg-type]
