"""Many turns of one trajectory, tools returning objects (pydantic models, dataclasses,
attrs classes, named tuples, lists and dicts of them, generators, objects the guard cannot
read), ``produces`` and ``grounded`` over them: a later call that uses an id and a text an
earlier result held is legal and is never blocked, nothing raises, every result comes back
as the very object, and every call is one step."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import types
import uuid
from collections.abc import Callable
from typing import Any

import attrs
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolguard as tg


class Status(enum.Enum):
    OPEN = "open"


class OrderModel(pydantic.BaseModel):
    id: str
    note: str
    status: Status = Status.OPEN


class OrderResponse(pydantic.BaseModel, extra="allow"):
    """An API's response model: the id among the extra values it keeps."""

    note: str


class OrderComputed(pydantic.BaseModel):
    number: int
    note: str

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def id(self) -> str:
        return f"ord-{self.number}"


@dataclasses.dataclass
class OrderData:
    id: str
    note: str
    tags: list[str] = dataclasses.field(default_factory=list)


@attrs.define
class OrderAttrs:
    id: str
    note: str


OrderTuple = collections.namedtuple("OrderTuple", "id note")


class Opaque:
    """An object the guard cannot look into: its comparisons and hash raise."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing")

    def __hash__(self) -> int:
        raise RuntimeError("no hashing")

    def __iter__(self) -> Any:
        raise RuntimeError("no iterating")


# How a result holds one order (an id and a note): each a way real tools answer.
SHAPES: dict[str, Callable[[str, str], Any]] = {
    "dict": lambda i, n: {"id": i, "note": n},
    "model": lambda i, n: OrderModel(id=i, note=n),
    "dataclass": lambda i, n: OrderData(id=i, note=n, tags=["x"]),
    "attrs": lambda i, n: OrderAttrs(id=i, note=n),
    "namedtuple": lambda i, n: OrderTuple(i, n),
    "list of models": lambda i, n: [OrderModel(id=i, note=n), OrderModel(id=i + "-b", note=n)],
    "tuple of dataclasses": lambda i, n: (OrderData(id=i, note=n),),
    "nested": lambda i, n: {"page": {"orders": [OrderModel(id=i, note=n)]}, "opaque": Opaque()},
    "model in dataclass": lambda i, n: OrderData(id=i, note=n, tags=[n]),
    "extra values": lambda i, n: [OrderResponse(note=n, id=i)],
    "computed id": lambda i, n: {"order": OrderComputed(number=int(i[4:]), note=n)},
}
# attrs instances: produced, but the information check does not see their values yet.
NOT_SEEN = {"attrs"}
OTHER_RESULTS: list[Callable[[], Any]] = [
    lambda: Opaque(),
    lambda: (x for x in [{"id": "never-read"}]),  # a generator object: never consumed
    lambda: [Opaque(), {"x": Opaque()}],
    lambda: {"when": uuid.uuid4(), "status": Status.OPEN, "raw": b"\xff"},
    lambda: None,
]


def _guard(grounded: bool) -> tuple[tg.Guard, dict[str, Any], dict[str, Callable[..., Any]]]:
    guard = tg.Guard()
    made: dict[str, Any] = {}

    @guard.tool(produces={"id": "order"})
    def find_order(shape: str, key: str) -> Any:
        made["last"] = SHAPES[shape](f"ord-{key}", f"note about {key}")
        return made["last"]

    @guard.tool(refs={"order_id": "order"}, grounded=["note"] if grounded else [])
    def update_order(order_id: str, note: str) -> dict[str, str]:
        made["last"] = {"updated": order_id}
        return made["last"]

    @guard.tool
    def other(which: int) -> Any:
        made["last"] = OTHER_RESULTS[which]()
        return made["last"]

    return guard, made, {"find_order": find_order, "update_order": update_order, "other": other}


_step = st.one_of(
    st.tuples(st.just("find"), st.sampled_from(sorted(SHAPES)), st.integers(0, 30)),
    st.tuples(st.just("update"), st.integers(0, 30)),
    st.tuples(st.just("other"), st.integers(0, len(OTHER_RESULTS) - 1)),
)


def _multi_turn(
    steps: list[tuple[Any, ...]], hows: list[int], shapes: set[str], grounded: bool = True
) -> None:
    guard, made, direct = _guard(grounded)
    known: list[tuple[str, str]] = []  # (id, note) of orders shown so far
    taken = 0
    with guard.trajectory("multi-turn", user_input="hello") as traj:
        for step, how in zip(steps, hows, strict=False):
            if step[0] == "find":
                if step[1] not in shapes:
                    continue
                name, args = "find_order", {"shape": step[1], "key": str(step[2])}
                known.append((f"ord-{step[2]}", f"note about {step[2]}"))
            elif step[0] == "update":
                if not known:
                    continue
                order_id, note = known[step[1] % len(known)]
                name, args = "update_order", {"order_id": order_id, "note": note}
            else:
                name, args = "other", {"which": step[1]}
            taken += 1
            if how % 3 == 2:
                pending = guard.check(name, args)
                assert pending.rejection is None, f"{steps}\n{pending.rejection}"
                made.pop("last", None)
                result = _TOOLS[name](guard, made, args)
                assert pending.finish(result).ok
            elif how % 3 == 1:
                assert direct[name](**args) is made["last"]  # raises ToolCallRejected if blocked
            else:
                result = guard.call(name, args)
                assert not isinstance(result, tg.Rejection), f"{steps}\n{result}"
                assert result is made["last"]
    assert traj.length == taken
    assert all(v.valid for v in traj.verdicts), traj.verdicts


# The framework's own run of a checked call: the same functions, unguarded.
_TOOLS: dict[str, Callable[[tg.Guard, dict[str, Any], dict[str, Any]], Any]] = {
    "find_order": lambda g, m, a: SHAPES[a["shape"]](f"ord-{a['key']}", f"note about {a['key']}"),
    "update_order": lambda g, m, a: {"updated": a["order_id"]},
    "other": lambda g, m, a: OTHER_RESULTS[a["which"]](),
}

_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


_turns = st.lists(_step, max_size=25)
_hows = st.lists(st.integers(0, 2), min_size=25, max_size=25)


@_SETTINGS
@given(_turns, _hows)
def test_later_legal_calls_over_object_results_are_never_blocked(
    steps: list[tuple[Any, ...]], hows: list[int]
) -> None:
    _multi_turn(steps, hows, set(SHAPES) - NOT_SEEN)


@_SETTINGS
@given(_turns, _hows)
def test_attrs_instances_produce_their_ids(steps: list[tuple[Any, ...]], hows: list[int]) -> None:
    _multi_turn(steps, hows, {"attrs", "dict"}, grounded=False)


@pytest.mark.parametrize("shape", ["namedtuple", "extra values", "computed id"])
def test_each_record_shape_produces_its_id(shape: str) -> None:
    _multi_turn([("find", shape, 1), ("update", 0)], [0, 0], {shape})


@pytest.mark.parametrize(
    "result, text",
    [
        (OrderAttrs(id="o", note="from attrs"), "from attrs"),
        ({"status": Status.OPEN}, "open"),
        ({"id": uuid.UUID(int=7)}, str(uuid.UUID(int=7))),
        ({"on": datetime.date(2030, 1, 2)}, "2030-01-02"),
        ({"at": datetime.datetime(2030, 1, 2, 3, 4)}, "2030-01-02T03:04:00"),
        ({"at": datetime.datetime(2030, 1, 2, 3, 4)}, "2030-01-02 03:04:00"),
        ({"price": decimal.Decimal("9.99")}, "9.99"),
    ],
)
def test_a_grounded_argument_copied_from_an_object_result_is_seen(result: Any, text: str) -> None:
    guard = tg.Guard()
    guard.register(lambda q: result, name="get")
    guard.register(lambda text: "sent", name="send", grounded=["text"])
    with guard.trajectory("seen", user_input="hello"):
        assert guard.call("get", {"q": "x"}) is result
        assert guard.call("send", {"text": text}) == "sent"


class Broken(pydantic.BaseModel):
    id: str

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        raise ValueError("the model's own bug")


def test_a_computed_field_that_raises_produces_nothing_and_breaks_nothing() -> None:
    guard = tg.Guard()
    result = Broken(id="ord-1")
    guard.register(lambda q: result, name="find", produces={"id": "order", "total": "total"})
    guard.register(lambda order_id: "ok", name="use", refs={"order_id": "order"})
    with guard.trajectory("broken"):
        assert guard.call("find", {"q": "x"}) is result
        assert guard.call("use", {"order_id": "ord-1"}) == "ok"


@pytest.mark.parametrize("empty", [[], (), set(), b""])
def test_an_empty_error_value_says_there_was_none(empty: Any) -> None:
    guard = tg.Guard()
    result = {"error": empty, "id": "ord-1"}
    proxy = types.MappingProxyType(result)  # a mapping, not a dict: the rule's function
    guard.register(lambda q: result, name="find")
    guard.register(lambda q: proxy, name="find_proxy")
    with guard.trajectory("empty") as traj:
        assert guard.call("find", {"q": "x"}) is result
        assert guard.call("find_proxy", {"q": "x"}) is proxy
    assert [v.valid for v in traj.verdicts] == [True, True]


def test_an_error_value_that_cannot_be_compared_is_an_error_not_a_guard_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = tg.Guard()
    result = {"error": Opaque()}
    guard.register(lambda q: result, name="f")
    with guard.trajectory("opaque") as traj:
        assert guard.call("f", {"q": "x"}) is result
    assert [(v.valid, v.check) for v in traj.verdicts] == [(False, "state.error_result")]
    assert "predicate raised" not in caplog.text
