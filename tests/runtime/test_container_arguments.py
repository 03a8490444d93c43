"""A container argument validation leaves as it was goes to the tool as the caller's own
object, so a tool that fills or edits a list, dict or set it was passed changes the caller's,
as it would unguarded; where validation converts something inside, the tool gets the
conversion, as before. Values and annotations are random (nested lists, dicts and sets of
scalars, optional and annotated containers), through a direct call and ``guard.call``."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

import toolguard as tg
from toolguard.runtime.tools.originals import MAX_NODES, unchanged

_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=3)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


def _tool(annotation: Any) -> tuple[tg.Guard, Any, list[Any]]:
    seen: list[Any] = []

    def keep(value: Any) -> int:
        seen.append(value)
        return len(seen)

    keep.__annotations__ = {"value": annotation, "return": int}
    guard = tg.Guard()
    return guard, guard.tool(keep, name="keep"), seen


@settings(max_examples=150, deadline=None)
@given(st.lists(_json, max_size=5), st.sampled_from([list, list[Any], list[Any] | None]))
def test_a_list_validation_keeps_goes_as_the_very_list(value: list[Any], annotation: Any) -> None:
    guard, keep, seen = _tool(annotation)
    keep(value)
    assert seen[-1] is value
    guard.call("keep", {"value": value})
    assert seen[-1] is value


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=3), _json, max_size=5))
def test_a_dict_validation_keeps_goes_as_the_very_dict(value: dict[str, Any]) -> None:
    _, keep, seen = _tool(Annotated[dict[str, Any], Field(description="a mapping")])
    keep(value)
    assert seen[-1] is value


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(), min_size=1, max_size=6))
def test_a_converted_container_goes_as_its_conversion(value: list[int]) -> None:
    _, keep, seen = _tool(list[float])  # every int becomes a float
    keep(value)
    assert seen[-1] is not value and seen[-1] == [float(v) for v in value]
    assert all(type(v) is float for v in seen[-1])


def test_a_tool_that_fills_the_list_it_was_passed_fills_the_callers() -> None:
    guard = tg.Guard()

    @guard.tool
    def add_to_cart(cart: list[str], item: str) -> int:
        cart.append(item)
        return len(cart)

    @guard.tool
    def tag(tags: set[str], labels: dict[str, int], name: str) -> None:
        tags.add(name)
        labels[name] = len(labels)

    cart: list[str] = ["apple"]
    assert add_to_cart(cart, "pear") == 2
    assert cart == ["apple", "pear"]
    tags: set[str] = set()
    labels: dict[str, int] = {}
    tag(tags, labels, "x")
    assert tags == {"x"} and labels == {"x": 0}


def test_a_model_built_from_a_dict_is_a_conversion() -> None:
    from pydantic import BaseModel

    class Item(BaseModel):
        name: str

    _, keep, seen = _tool(list[Item])
    value = [{"name": "a"}]
    keep(value)
    assert isinstance(seen[-1][0], Item) and seen[-1] is not value


@pytest.mark.parametrize(
    ("new", "old", "same"),
    [
        ([1, [2, {"a": "b"}]], [1, [2, {"a": "b"}]], True),
        ([1.0], [1], False),  # converted: int -> float
        ([True], [1], False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False),  # another order
        ({1, 2}, {1, 2}, True),
        ({1.0}, {1}, False),
        ([float("nan")], [float("nan")], False),  # never equal: the conversion stands
        ([0] * (MAX_NODES + 1), [0] * (MAX_NODES + 1), False),  # too large to compare
    ],
)
def test_unchanged_is_the_same_types_all_the_way_down(new: Any, old: Any, same: bool) -> None:
    assert unchanged(new, old) is same
