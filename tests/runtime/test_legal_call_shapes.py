"""Legal calls of tools whose shape the property test (test_legal_calls.py) found blocked or
changed: each test here failed before its fix."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import warnings
from typing import Any

import pydantic
import pytest

import toolguard as tg

_CACHE: dict[str, int] = {}
_UNSET: list[Any] = []  # a sentinel the function compares by identity


def test_a_parameter_left_out_gets_its_own_default_object() -> None:
    guard = tg.Guard()
    seen: list[Any] = []

    @guard.tool
    def lookup(key: str, cache: dict[str, int] = _CACHE, since: Any = _UNSET) -> int:
        seen.append((cache, since))
        cache[key] = cache.get(key, 0) + 1
        return cache[key]

    assert lookup("a") == 1
    assert guard.call("lookup", '{"key": "a"}') == 2  # the cache is the one shared dict
    pending = guard.check("lookup", {"key": "a"})
    assert pending.arguments["cache"] is _CACHE
    pending.cancel()
    assert all(cache is _CACHE and since is _UNSET for cache, since in seen)
    assert _CACHE == {"a": 2}
    # One given is validated and handed over as the model sent it, not the default.
    assert guard.call("lookup", {"key": "a", "cache": {}}) == 1


@pytest.mark.parametrize("name", ["_private", "_", "model_config", "model_dump", "json"])
def test_parameter_names_pydantic_keeps_for_itself_are_arguments(name: str) -> None:
    guard = tg.Guard()
    namespace: dict[str, Any] = {}
    exec(f"def tool(n: int, {name}: int = 0) -> tuple:\n    return (n, {name})", namespace)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pydantic warns about json "shadowing" BaseModel.json
        wrapped = guard.tool(namespace["tool"], name="t")
    assert wrapped(1, **{name: 5}) == (1, 5)
    assert guard.call("t", {"n": 1, name: 5}) == (1, 5)
    assert guard.call("t", {"n": 1}) == (1, 0)
    refused = guard.call("t", {"n": 1, name: "five"})
    assert isinstance(refused, tg.Rejection) and f"{name}:" in refused.message
    unknown = guard.call("t", {"n": 1, "tg_argument_1": 5})  # the field's own name
    assert isinstance(unknown, tg.Rejection) and "unknown argument" in unknown.message
    assert f"{name}?: integer" in str(guard.call("t", {}))  # the model is shown the name


def test_a_partial_is_validated_by_its_function_annotations() -> None:
    guard = tg.Guard()

    def book(when: datetime.datetime, seats: int, room: str = "a") -> tuple:
        return (when, seats, room)

    guard.tool(functools.partial(book, room="b"), name="book")
    assert guard.call("book", {"when": "2030-01-02T03:04:05", "seats": 2}) == (
        datetime.datetime(2030, 1, 2, 3, 4, 5),
        2,
        "b",
    )
    refused = guard.call("book", {"when": "2030-01-02T03:04:05", "seats": "many"})
    assert isinstance(refused, tg.Rejection) and refused.cause == "schema"


@dataclasses.dataclass
class Booking:  # unhashable (eq without frozen); its attribute annotations are no parameters
    seats: str = "attribute, not parameter"

    def __call__(self, seats: int, when: datetime.datetime) -> tuple:
        return (seats, when)


def test_a_callable_object_is_validated_by_its_call_annotations() -> None:
    guard = tg.Guard()
    first, second = Booking(), Booking()
    guard.tool(first, name="first")  # was: TypeError: unhashable type: 'Booking'
    guard.tool(second, name="second")
    got = guard.call("first", {"seats": 2, "when": "2030-01-02T03:04:05"})
    assert got == (2, datetime.datetime(2030, 1, 2, 3, 4, 5))
    refused = guard.call("second", {"seats": "two", "when": "2030-01-02T03:04:05"})
    assert isinstance(refused, tg.Rejection) and refused.cause == "schema"


def test_a_class_defined_where_the_tool_is_declared_resolves() -> None:
    # `from __future__ import annotations` (this module) makes the annotation the text
    # "Seat", which only this function's locals name.
    guard = tg.Guard()

    @dataclasses.dataclass
    class Seat:
        row: int

    @guard.tool
    def reserve(seat: Seat) -> Any:
        return seat

    assert guard.call("reserve", {"seat": {"row": 3}}) == Seat(3)
    assert isinstance(guard.call("reserve", {"seat": {"row": "x"}}), tg.Rejection)


def classify(cls: str, text: str) -> tuple:  # a module's function: `cls` is an argument
    return (cls, text)


def test_a_functions_first_parameter_named_cls_is_an_argument() -> None:
    guard = tg.Guard()
    wrapped = guard.tool(classify)
    assert wrapped("spam", "buy now") == ("spam", "buy now")
    assert wrapped(cls="spam", text="buy now") == ("spam", "buy now")


def test_a_function_whose_first_parameter_is_cls_is_callable_by_name() -> None:
    guard = tg.Guard()
    guard.tool(classify)
    assert guard.call("classify", {"cls": "spam", "text": "x"}) == ("spam", "x")


def test_a_method_decorated_in_its_class_body_still_leaves_self_out() -> None:
    guard = tg.Guard()

    class Service:
        @guard.tool
        def run(self, n: int) -> tuple:
            return (self, n)

    service = Service()
    assert service.run(3) == (service, 3)
    assert service.run(n=3) == (service, 3)


@dataclasses.dataclass(frozen=True)
class Counter:  # hashable by value: two equal instances are still two objects
    start: int = 0

    def __call__(self, n: int) -> int:
        return self.start + n


def test_equal_callable_objects_of_one_spec_are_two_tools() -> None:
    spec = tg.ToolSpec(name="count")
    first, second = Counter(), Counter()
    one = tg.Guard().register(first, spec)
    other = tg.Guard().register(second, spec)
    # The compiled tool runs dry runs on its own function: each its own object.
    assert one.toolguard_tool.fork_fn is first
    assert other.toolguard_tool.fork_fn is second


def test_typed_keyword_arguments_are_validated_and_converted() -> None:
    guard = tg.Guard()

    @guard.tool
    def schedule(title: str, **dates: datetime.date) -> dict[str, Any]:
        return dates

    assert guard.call("schedule", {"title": "t", "start": "2030-01-02"}) == {
        "start": datetime.date(2030, 1, 2)
    }
    refused = guard.call("schedule", {"title": "t", "start": "soon"})
    assert isinstance(refused, tg.Rejection) and "start" in refused.message


REPORTS = """
from __future__ import annotations
import datetime
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from reports.models import Report  # never imported at run time

def make_report(day: datetime.date, title: str) -> Report:
    return (day, title)
"""


def test_a_return_type_imported_for_type_checking_only_leaves_the_arguments_typed() -> None:
    # It was "you should define `datetime`": one unresolvable annotation (the return type,
    # no argument) made every annotation raw text, resolved in toolguard's own module.
    namespace: dict[str, Any] = {"__name__": "reports"}
    exec(REPORTS, namespace)
    guard = tg.Guard()
    guard.tool(namespace["make_report"])
    assert guard.call("make_report", {"day": "2030-01-02", "title": "t"}) == (
        datetime.date(2030, 1, 2),
        "t",
    )
    assert isinstance(guard.call("make_report", {"day": "soon", "title": "t"}), tg.Rejection)


class _AliasedArgs(pydantic.BaseModel):
    order_id: str = pydantic.Field(alias="orderId")
    note: str = ""


def test_an_args_model_with_aliases_takes_the_functions_own_names_too() -> None:
    guard = tg.Guard()

    def update(order_id: str, note: str = "") -> tuple:
        return (order_id, note)

    wrapped = guard.register(update, name="update", args_model=_AliasedArgs)
    assert guard.call("update", {"orderId": "o-1"}) == ("o-1", "")  # as the model was shown
    assert wrapped(order_id="o-1", note="n") == ("o-1", "n")  # was: orderId missing
    assert wrapped("o-1") == ("o-1", "")
    unknown = guard.call("update", {"orderId": "o-1", "order": "x"})
    assert isinstance(unknown, tg.Rejection) and "order: unknown argument" in unknown.message


def test_a_json_schema_whose_ref_resolves_nowhere_is_refused_when_declared() -> None:
    # It raised out of guard.check at the first call the validator looked the $ref up in.
    guard = tg.Guard()
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}
    with pytest.raises(tg.ToolDefinitionError, match=r"tool 'f': its JSON Schema's \$ref"):
        guard.declare("f", json_schema=schema)
    defined = {**schema, "$defs": {"missing": {"type": "string"}}}
    guard.declare("f", json_schema=defined)
    assert guard.check("f", {"x": "a"}).rejection is None


@pytest.mark.parametrize("place", ["items[*].id", "[*].id", "items[0].id", "a[]b", "items.*"])
def test_a_produces_path_with_an_index_or_wildcard_is_refused(place: str) -> None:
    # It was accepted and bound nothing: every later call using the id was blocked.
    guard = tg.Guard()
    with pytest.raises(tg.ToolDefinitionError, match="no step of a path"):
        guard.register(lambda q: {"items": [{"id": "x"}]}, name="f", produces={place: "k"})


@pytest.mark.parametrize("place", ["items[].id", "$.items[].id", "$[].id", "items.[].id"])
def test_produces_paths_of_keys_and_every_item_bind(place: str) -> None:
    guard = tg.Guard()
    answer = {"items": [{"id": "x"}]} if "items" in place else [{"id": "x"}]
    guard.register(lambda q: answer, name="f", produces={place: "k"})
    with guard.trajectory() as traj:
        guard.call("f", {"q": "a"})
        assert traj.live_values("k") == ["x"]


def test_a_refs_path_with_an_index_is_refused() -> None:
    guard = tg.Guard()
    with pytest.raises(tg.ToolDefinitionError, match=r"refs path 'ids\[0\]'"):
        guard.register(lambda ids: None, name="g", refs={"ids[0]": "k"})
