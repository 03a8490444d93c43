"""Bound variables: production, kinds, staleness, explicit binding; grounded arguments;
calls made outside any trajectory."""

from __future__ import annotations

import datetime
import enum
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

import toolguard as tg


class Contact(BaseModel):
    id: str
    name: str


@dataclass
class Page:
    items: list[Contact]
    next_cursor: str | None = None


def use_tool(guard: tg.Guard):
    @guard.tool(refs={"contact_id": "contact_id"})
    def use(contact_id: str) -> str:
        return contact_id

    return use


def live(traj: tg.Trajectory, kind: str) -> set:
    return set(traj.live_values(kind))


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"id": "a"}, {"a"}),
        ({"results": [{"id": "a", "info": {"id": "b"}}, {"id": "c"}]}, {"a", "b", "c"}),
        ({"id": ["a", "b"]}, {"a", "b"}),
        ([{"id": "a"}, [{"id": "b"}]], {"a", "b"}),
        ([Contact(id="a", name="Ann"), Contact(id="b", name="Bo")], {"a", "b"}),
        (Page([Contact(id="a", name="Ann")], next_cursor="c1"), {"a"}),
        ({"page": Page([Contact(id="d", name="Di")])}, {"d"}),
        ({"other": "x"}, set()),
        (None, set()),
    ],
)
def test_production_from_nested_results(otel, result, expected):
    guard = otel.guard()

    @guard.tool(produces={"id": "contact_id"})
    def search() -> object:
        return result

    with otel.trajectory("t") as traj:
        assert search() is result
        assert live(traj, "contact_id") == expected


def test_production_of_whole_result_and_by_callable(otel):
    guard = otel.guard()

    @guard.tool(produces={"$": "session"})
    def open_session() -> str:
        return "sess-1"

    @guard.tool(produces={lambda r: [line.split()[0] for line in r.splitlines()]: "file"})
    def ls() -> str:
        return "a.txt 10\nb.txt 20"

    with otel.trajectory("t") as traj:
        open_session()
        ls()
        assert live(traj, "session") == {"sess-1"}
        assert live(traj, "file") == {"a.txt", "b.txt"}


def test_dependency_satisfied_by_production(otel):
    guard = otel.guard()

    @guard.tool(produces={"id": "contact_id"})
    def search(phone: str) -> list[Contact]:
        return [Contact(id="id_8923", name="Ann")]

    use = use_tool(guard)
    with otel.trajectory("t"):
        with pytest.raises(tg.ToolCallRejected) as info:
            use("id_8923")  # not produced yet
        assert info.value.cause == "dependency"
        assert info.value.check == "dependency.contact_id"
        assert "No contact_id is known yet" in info.value.model_message
        search("+1-555-0199")
        assert use("id_8923") == "id_8923"
    assert [s.attributes["toolguard.valid"] for s in otel.call_spans("t")] == [False, True, True]


def test_candidate_values_listed_in_model_message(otel):
    guard = otel.guard()
    use = use_tool(guard)
    with otel.trajectory("t") as traj:
        traj.bind("contact_id", "id_1")
        traj.bind("contact_id", "id_2")
        with pytest.raises(tg.ToolCallRejected) as info:
            use("+1-555-0199")
    text = info.value.model_message
    assert "'+1-555-0199'" in text
    assert "'id_1'" in text and "'id_2'" in text
    assert "contact_id" in text


def test_incompatible_kind(otel):
    guard = otel.guard()
    use = use_tool(guard)
    with otel.trajectory("t") as traj:
        traj.bind("user_id", "u_7")
        traj.bind("contact_id", "id_1")
        with pytest.raises(tg.ToolCallRejected) as info:
            use("u_7")
    exc = info.value
    assert exc.cause == "dependency"
    assert "is a user_id, not a contact_id" in exc.message
    assert "needs a contact_id, but 'u_7' is a user_id" in exc.model_message
    assert "'id_1'" in exc.model_message


def test_staleness_after_invalidates(otel):
    guard = otel.guard()

    @guard.tool(produces={"id": "contact_id"})
    def add(name: str) -> dict:
        return {"id": f"id_{name}"}

    @guard.tool(refs={"contact_id": "contact_id"}, invalidates={"contact_id": "contact_id"})
    def remove(contact_id: str) -> bool:
        return True

    with otel.trajectory("t") as traj:
        add("ann")
        add("bo")
        assert remove("id_ann") is True
        assert live(traj, "contact_id") == {"id_bo"}
        with pytest.raises(tg.ToolCallRejected) as info:
            remove("id_ann")
        exc = info.value
        assert exc.cause == "dependency"
        assert "stale" in exc.message
        assert "remove at step 3" in exc.message
        assert "invalidated" in exc.model_message
        assert "'id_bo'" in exc.model_message
        add("ann")  # produced again: live again
        assert remove("id_ann") is True


def test_rejected_call_neither_produces_nor_invalidates(otel):
    guard = otel.guard()

    @guard.tool(produces={"id": "contact_id"}, error_result=lambda r: "error" in r)
    def add(name: str) -> dict:
        return {"error": "full", "id": "id_x"}

    @guard.tool(
        refs={"contact_id": "contact_id"},
        invalidates={"contact_id": "contact_id"},
        error_result=lambda r: r is False,
    )
    def remove(contact_id: str) -> bool:
        return False

    with otel.trajectory("t") as traj:
        add("x")
        assert live(traj, "contact_id") == set()
        traj.bind("contact_id", "id_y")
        assert remove("id_y") is False
        assert live(traj, "contact_id") == {"id_y"}


def test_blocked_call_does_not_invalidate(otel):
    guard = otel.guard()

    @guard.tool(
        refs={"contact_id": "contact_id"},
        invalidates={"contact_id": "contact_id"},
        preconditions=[tg.Precondition("never", lambda contact_id: False)],
    )
    def remove(contact_id: str) -> None:
        return None

    with otel.trajectory("t") as traj:
        traj.bind("contact_id", "id_1")
        with pytest.raises(tg.ToolCallRejected):
            remove("id_1")
        assert live(traj, "contact_id") == {"id_1"}


def test_explicit_bind(otel):
    guard = otel.guard()
    use = use_tool(guard)
    with otel.trajectory("t") as traj:
        traj.bind("contact_id", "id_typed_by_user")
        assert use("id_typed_by_user") == "id_typed_by_user"
        binding = traj.lookup("contact_id", "id_typed_by_user")
        assert binding is not None and binding.produced_by == "user"


def test_list_argument_every_item_must_be_bound(otel):
    guard = otel.guard()

    @guard.tool(refs={"ids": "contact_id"})
    def merge(ids: list[str]) -> int:
        return len(ids)

    with otel.trajectory("t") as traj:
        traj.bind("contact_id", "a")
        traj.bind("contact_id", "b")
        assert merge(["a", "b"]) == 2
        with pytest.raises(tg.ToolCallRejected) as info:
            merge(["a", "zzz"])
        assert "'zzz'" in info.value.message


def test_optional_reference_left_out(otel):
    guard = otel.guard()

    @guard.tool(refs={"parent": "folder_id"})
    def mkdir(name: str, parent: str | None = None) -> str:
        return name

    with otel.trajectory("t"):
        assert mkdir("x") == "x"
        with pytest.raises(tg.ToolCallRejected):
            mkdir("y", parent="nope")


def test_unhashable_value_is_not_a_bound_value(otel):
    guard = otel.guard()

    @guard.tool(refs={"ref": "thing"})
    def f(ref: dict) -> None:
        return None

    with otel.trajectory("t") as traj:
        traj.bind("thing", {"a": 1})  # unhashable: ignored, no crash
        with pytest.raises(tg.ToolCallRejected) as info:
            f({"a": 1})
    assert info.value.cause == "dependency"


def test_produces_callable_that_raises_does_not_break_the_call(otel, caplog):
    guard = otel.guard()

    @guard.tool(produces={lambda r: 1 / 0: "k"})
    def f() -> str:
        return "ok"

    with otel.trajectory("t"), caplog.at_level("ERROR", logger="toolguard"):
        assert f() == "ok"
    assert otel.only_call().attributes["toolguard.valid"] is True
    assert any("reading the result of f failed" in r.getMessage() for r in caplog.records)


# -- grounded arguments ---------------------------------------------------------------------


def test_grounded_by_user_input_tool_output_and_observe(otel):
    guard = otel.guard()

    @guard.tool
    def lookup(name: str) -> dict:
        return {"phone": "+1-555-0100", "floor": 7}

    @guard.tool(grounded=["phone"])
    def call_phone(phone: str) -> str:
        return phone

    @guard.tool(grounded=["floor"])
    def go(floor: int) -> int:
        return floor

    with otel.trajectory("t", user_input="Please call +1-555-0199 for me") as traj:
        assert call_phone("+1-555-0199") == "+1-555-0199"  # inside a user sentence
        with pytest.raises(tg.ToolCallRejected) as info:
            call_phone("+1-555-0100")
        assert info.value.cause == "information"
        assert "do not guess" in info.value.model_message
        lookup("Ann")  # its output is now seen
        assert call_phone("+1-555-0100") == "+1-555-0100"
        assert go(7) == 7
        with pytest.raises(tg.ToolCallRejected):
            call_phone("+1-555-0111")
        traj.observe("the office is +1-555-0111")
        assert call_phone("+1-555-0111") == "+1-555-0111"


@pytest.mark.parametrize("value", ["", "  ", "<unknown>", "N/A", "TODO", "<phone>", "{phone}"])
def test_placeholders_fail_even_when_seen(otel, value):
    guard = otel.guard()

    @guard.tool(grounded=["phone"])
    def call_phone(phone: str) -> str:
        return phone

    with (
        otel.trajectory("t", user_input=[value, "context"]),
        pytest.raises(tg.ToolCallRejected) as info,
    ):
        call_phone(value)
    assert info.value.cause == "information"
    assert "placeholder" in info.value.message


# -- outside any trajectory -----------------------------------------------------------------


def test_calls_outside_a_trajectory(otel):
    guard = otel.guard()
    use = use_tool(guard)

    @guard.tool(grounded=["phone"])
    def call_phone(phone: str) -> str:
        return phone

    @guard.tool(preconditions=[tg.Precondition("positive", lambda n: n > 0)])
    def count(n: int) -> int:
        return n

    # No trajectory: nothing to check bound variables or grounding against, so those checks
    # are skipped; schema, preconditions, placeholders and the environment still apply.
    assert use("anything") == "anything"
    assert call_phone("+1-555-0000") == "+1-555-0000"
    with pytest.raises(tg.ToolCallRejected) as info:
        call_phone("<unknown>")
    assert info.value.step is None
    with pytest.raises(tg.ToolCallRejected):
        count(-1)
    with pytest.raises(tg.ToolCallRejected):
        use(123)
    spans = otel.call_spans()
    assert len(spans) == 5
    for span in spans:
        assert "toolguard.trajectory.id" not in span.attributes
        assert "toolguard.step" not in span.attributes
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert "toolguard.valid" in span.attributes
        assert span.parent is None
    assert otel.summary_spans() == []
    assert tg.current_trajectory() is None


def test_trajectories_do_not_leak_bindings_sequentially(otel):
    guard = otel.guard()
    use = use_tool(guard)
    with otel.trajectory("a") as a:
        a.bind("contact_id", "id_1")
        use("id_1")
    with otel.trajectory("b"), pytest.raises(tg.ToolCallRejected):
        use("id_1")


def test_a_guarded_tool_calling_another_adds_no_step(otel) -> None:
    guard = otel.guard()

    @guard.tool
    def inner(x: int) -> int:
        return x + 1

    @guard.tool
    def outer(x: int) -> int:
        return inner(x) * 2

    with otel.trajectory("nested") as traj:
        assert outer(1) == 4
        assert outer(2) == 6
    assert traj.length == 2
    assert [v.tool for v in traj.verdicts] == ["outer", "outer"]
    spans = {s.name: s for s in otel.exporter.get_finished_spans()}
    inner_span = spans["execute_tool inner"]
    assert "toolguard.step" not in inner_span.attributes
    outer_ids = {
        s.context.span_id
        for s in otel.exporter.get_finished_spans()
        if s.name == "execute_tool outer"
    }
    assert inner_span.parent.span_id in outer_ids


def test_bind_result_binds_a_tools_products_without_a_step(otel) -> None:
    guard = otel.guard()

    @guard.tool(produces={"id": "order_id"})
    def list_orders(user: str) -> list[dict]:
        return [{"id": "o-1"}, {"id": "o-2"}]

    @guard.tool(refs={"order_id": "order_id"})
    def cancel(order_id: str) -> str:
        return order_id

    with otel.trajectory("context") as traj:
        traj.bind_result(guard.get_tool("list_orders"), [{"id": "o-2"}])
        assert cancel(order_id="o-2") == "o-2"
        assert guard.call("cancel", {"order_id": "o-1"}).cause == "dependency"
    assert traj.length == 2


def test_refs_reach_ids_nested_in_an_argument(otel) -> None:
    guard = otel.guard()

    @guard.tool(produces={"id": "payment_id"})
    def payment_methods() -> list[dict]:
        return [{"id": "card-1"}, {"id": "gift-9"}]

    @guard.tool(refs={"payments[].payment_id": "payment_id", "address.zip": "zip"})
    def book(payments: list[dict], address: dict | None = None) -> str:
        return "booked"

    with otel.trajectory("nested-ids") as traj:
        payment_methods()
        traj.bind("zip", "94110")
        ok = book(payments=[{"payment_id": "card-1"}, {"payment_id": "gift-9"}])
        bad = guard.call("book", {"payments": [{"payment_id": "card-1"}, {"payment_id": "card-7"}]})
        bad_zip = guard.call(
            "book", {"payments": [{"payment_id": "card-1"}], "address": {"zip": "00000"}}
        )
    assert ok == "booked"
    assert bad.check == "dependency.payments[].payment_id" and "'card-7'" in bad.message
    assert "card-1" in bad.model_message  # the values the agent could use
    assert bad_zip.check == "dependency.address.zip"


def test_a_refs_path_must_start_at_an_argument(otel) -> None:
    guard = otel.guard()
    with pytest.raises(tg.ToolDefinitionError, match=r"'book'.*'payment'"):

        @guard.tool(refs={"payment[].id": "payment_id"})
        def book(payments: list[dict]) -> str:
            return "booked"


def test_bind_result_never_raises_and_binds_what_it_found_first(otel, caplog) -> None:
    guard = otel.guard()

    def ids(result: Any) -> Iterator[str]:
        for row in result:
            yield row["id"]  # a KeyError on a row of another shape, a TypeError on a dict

    @guard.tool(produces={ids: "order_id"})
    def list_orders(user: str) -> list[dict]:
        return []

    @guard.tool(refs={"order_id": "order_id"})
    def cancel(order_id: str) -> str:
        return order_id

    with otel.trajectory("broken-produces") as traj:
        traj.bind_result(guard.get_tool("list_orders"), {"errors": "no such user"})
        traj.bind_result(guard.get_tool("list_orders"), [{"id": "o-1"}, {"code": 7}])
        assert cancel(order_id="o-1") == "o-1"
        assert guard.call("cancel", {"order_id": "o-9"}).cause == "dependency"
    assert "reading an earlier result of list_orders failed" in caplog.text


def test_bind_result_leaves_an_invalidated_value_stale(otel) -> None:
    guard = otel.guard()

    @guard.tool(produces={"id": "contact_id"})
    def search() -> list[dict]:
        return [{"id": "c-1"}, {"id": "c-2"}]

    @guard.tool(refs={"contact_id": "contact_id"}, invalidates={"contact_id": "contact_id"})
    def remove(contact_id: str) -> str:
        return "removed"

    with otel.trajectory("one-conversation") as traj:
        search()
        remove(contact_id="c-1")
        # the next turn replays the earlier search's result: c-1 stays removed, c-3 is new
        traj.bind_result(guard.get_tool("search"), [{"id": "c-1"}, {"id": "c-3"}])
        rejection = guard.call("remove", {"contact_id": "c-1"})
        assert rejection.cause == "dependency" and "invalidated" in str(rejection)
        assert guard.call("remove", {"contact_id": "c-3"}) == "removed"


# -- values the parameter's type converted -------------------------------------------------


def test_refs_find_an_id_the_parameter_type_converted(otel) -> None:
    """The model copies an id as JSON text; the tool's parameter type converts it. The
    dependency check finds the binding of the value written the same."""
    guard = otel.guard()
    order = "12345678-1234-5678-1234-567812345678"

    @guard.tool(produces={"id": "order_id"})
    def list_orders() -> list[dict]:
        return [{"id": order}, {"id": 42}, {"id": True}]

    @guard.tool(refs={"order_id": "order_id"}, invalidates={"order_id": "order_id"})
    def cancel(order_id: uuid.UUID) -> str:
        return f"cancelled {order_id}"

    @guard.tool(refs={"ticket": "order_id"})
    def close(ticket: str) -> str:
        return f"closed {ticket}"

    with otel.trajectory("converted") as traj:
        list_orders()
        assert guard.call("close", '{"ticket": "42"}') == "closed 42"  # 42 in the result
        assert guard.call("cancel", json.dumps({"order_id": order})) == f"cancelled {order}"
        again = guard.call("cancel", json.dumps({"order_id": order}))
        assert again.cause == "dependency" and "invalidated" in str(again)  # stale stays stale
        # True was produced, but no id is written "True"; 43 was never produced
        assert guard.call("close", '{"ticket": "True"}').cause == "dependency"
        assert guard.call("close", '{"ticket": "43"}').cause == "dependency"
    assert traj.first_error_depth == 4


class Color(enum.Enum):
    RED = "red"


def test_grounded_reads_the_value_as_the_model_sent_it(otel) -> None:
    guard = otel.guard()

    @guard.tool(grounded=["degrees"])
    def set_thermostat(degrees: float) -> float:
        return degrees

    @guard.tool(grounded=["color"])
    def paint(color: Color) -> str:
        return color.value

    @guard.tool(grounded=["when"])
    def book(when: datetime.datetime) -> str:
        return when.isoformat()

    @guard.tool(grounded=["names"])
    def invite(names: list[str]) -> int:
        return len(names)

    said = "Set it to 72, paint it red, book 2024-05-01T10:00:00Z and invite Ann, Bob"
    with otel.trajectory("as-sent", user_input=said) as traj:
        assert guard.call("set_thermostat", '{"degrees": 72}') == 72.0
        assert guard.call("paint", '{"color": "red"}') == "red"
        assert paint(Color.RED) == "red"  # a direct call's member: by its value
        assert guard.call("book", '{"when": "2024-05-01T10:00:00Z"}').startswith("2024-05-01")
        assert guard.call("invite", '{"names": ["Ann", "Bob"]}') == 2
        assert guard.call("invite", '{"names": []}') == 0
        made_up = guard.call("invite", '{"names": ["Ann", "Zoe"]}')
        assert made_up.cause == "information" and "no user message or tool output" in str(made_up)
        placeholder = guard.call("invite", '{"names": ["Ann", "<name>"]}')
        assert placeholder.cause == "information" and "placeholder" in str(placeholder)
        assert guard.call("set_thermostat", '{"degrees": 73}').cause == "information"
    assert traj.first_error_depth == 7


def test_bind_result_binds_nothing_from_an_error_result(otel, caplog) -> None:
    guard = otel.guard()

    @guard.tool(produces={"id": "order_id"})
    def find_order(user: str) -> dict:
        return {}

    @guard.tool(produces={"id": "order_id"}, error_result=lambda r: r.get("status") == "failed")
    def find_own(user: str) -> dict:
        return {}

    @guard.tool(refs={"order_id": "order_id"})
    def cancel(order_id: str) -> str:
        return order_id

    with otel.trajectory("earlier-errors") as traj:
        # judged errors when the calls ran, they bound nothing then: nor in a later turn
        traj.bind_result(guard.get_tool("find_order"), {"error": "timeout", "id": "o-1"})
        traj.bind_result(guard.get_tool("find_own"), {"status": "failed", "id": "o-2"})
        traj.bind_result(
            guard.get_tool("find_own"), {"error": "by its own rule no error", "id": "o-3"}
        )
        assert guard.call("cancel", {"order_id": "o-1"}).cause == "dependency"
        assert guard.call("cancel", {"order_id": "o-2"}).cause == "dependency"
        assert cancel(order_id="o-3") == "o-3"
    assert "failed" not in caplog.text  # skipped quietly, not a logged failure
