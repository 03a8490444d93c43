"""Legal direct calls of the shapes real code makes, run with what Python would pass: a
method's plain function guarded outside its class and called with its instance first,
markers on ``*args`` and ``**kwargs``."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

import toolguard as tg


class Service:
    def __init__(self) -> None:
        self.calls: list[tuple[Service, int]] = []

    def run(self, x: int) -> int:
        self.calls.append((self, x))
        return x * 2


@pytest.mark.parametrize(
    "call",
    [
        lambda guarded, s: guarded(s, 3),
        lambda guarded, s: guarded(s, x=3),
        lambda guarded, s: guarded(self=s, x=3),
    ],
)
def test_a_class_function_guarded_outside_its_class_gets_its_instance_first(call: Any) -> None:
    guard = tg.Guard()
    guarded = guard.tool(Service.run)
    service = Service()
    assert call(guarded, service) == 6  # as Service.run(service, 3)
    assert service.calls == [(service, 3)]


def test_a_method_called_through_its_class_with_self_by_keyword() -> None:
    guard = tg.Guard()

    class Box:
        @guard.tool
        def put(self, x: int) -> tuple[Any, int]:
            return self, x

    box = Box()
    assert Box.put(self=box, x=1) == (box, 1)  # as Python runs it


def test_its_instance_is_what_preconditions_see() -> None:
    seen: list[Any] = []

    def note(instance: Any) -> bool:
        seen.append(instance)
        return True

    guard = tg.Guard()
    guarded = guard.tool(Service.run, preconditions=[tg.Precondition("noted", note)])
    service = Service()
    guarded(service, 1)
    assert seen == [service]


def test_a_ref_marker_on_star_args_checks_each_value() -> None:
    guard = tg.Guard()

    @guard.tool(produces={"id": "contact_id"})
    def search() -> list[dict[str, str]]:
        return [{"id": "c1"}, {"id": "c2"}]

    @guard.tool
    def merge(*ids: Annotated[str, tg.Ref("contact_id")]) -> tuple[str, ...]:
        return ids

    assert guard.get_tool("merge").refs == {"ids": "contact_id"}
    with guard.trajectory():
        search()
        assert merge("c1", "c2") == ("c1", "c2")
        with pytest.raises(tg.ToolCallRejected) as err:
            merge("c1", "nope")
    assert err.value.rejection.cause == "dependency"


def test_a_guard_marker_on_star_star_kwargs_is_a_definition_error() -> None:
    """Checked by name, a marker on **kwargs would check nothing: said when declared."""
    guard = tg.Guard()

    def tag(**labels: Annotated[str, tg.Ref("label")]) -> dict[str, str]:
        return labels

    with pytest.raises(tg.ToolDefinitionError, match=r"'tag'.*labels"):
        guard.tool(tag)


def test_an_annotation_naming_a_later_class_is_an_error_naming_argument_and_fix() -> None:
    """Python runs the function; the guard needs the type when the tool is declared, and
    says which argument's annotation names what is not defined yet, and what to do."""
    guard = tg.Guard()

    def create(n: int, order: list[NotYet]) -> str:  # noqa: F821  (defined later on purpose)
        return "ok"

    with pytest.raises(tg.ToolDefinitionError) as err:
        guard.tool(create)
    text = str(err.value)
    assert "'create'" in text and "'order'" in text and "NotYet" in text
    assert "model_rebuild" not in text  # pydantic's advice, which the user cannot follow
    assert "register" in text
