"""The guarded call under hostile input, cancellation, lost contexts and privacy rules."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import logging
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import toolguard as tg

SECRET = "SECRET-4242-VALUE"


def ended(otel) -> list:
    spans = otel.call_spans()
    assert all(s.end_time is not None for s in spans)
    return spans


# -- hostile values ---------------------------------------------------------------------------


class Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")

    __str__ = __repr__


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("result", [Hostile(), nested(5000), {"a": Hostile()}])
def test_record_content_never_breaks_a_call_that_already_ran(otel, result) -> None:
    guard = otel.guard(record_content=True)
    guard.register(lambda x: result, name="f")
    with otel.trajectory("t") as traj:
        assert guard.call("f", {"x": Hostile()}) is result
    span = ended(otel)[0]
    assert traj.verdicts[0].valid
    assert len(span.attributes["gen_ai.tool.call.result"]) <= 4097
    assert len(span.attributes["gen_ai.tool.call.arguments"]) <= 4097


def test_json_nested_thousands_deep_is_a_schema_failure(otel) -> None:
    guard = otel.guard()
    guard.register(lambda x: x, name="f")
    text = '{"x": ' + "[" * 5000 + "]" * 5000 + "}"
    rejection = guard.call("f", text)
    assert isinstance(rejection, tg.Rejection) and rejection.check == "schema.json"
    assert len(rejection.model_message) <= 2001


def test_a_callable_object_with_an_async_call_is_awaited(otel) -> None:
    class Fetch:
        async def __call__(self, url: str) -> str:
            await asyncio.sleep(0)
            return url.upper()

    guard = otel.guard()
    guard.register(Fetch(), name="fetch")

    async def main() -> Any:
        with otel.trajectory("t"):
            return await guard.acall("fetch", {"url": "a"})

    assert asyncio.run(main()) == "A"
    assert ended(otel)[0].attributes["toolguard.valid"] is True


def test_ten_megabyte_names_and_arguments_give_bounded_messages(otel) -> None:
    guard = otel.guard()
    for i in range(10_000):
        guard.register(lambda x: x, name=f"tool_{i}")
    huge = "x" * 10_000_000
    rejected = guard.call("tool_1" + huge, {"x": 1})  # a misspelt 10 MB name among 10,000
    assert rejected.check == "schema.tool"
    bad_arg = guard.call("tool_1", {"x": 1, huge: 2})
    assert bad_arg.check == "schema.args"
    for rejection in (rejected, bad_arg):
        assert len(rejection.model_message) <= 2001 and len(rejection.message) <= 1025
    for span in ended(otel):
        for value in span.attributes.values():
            assert len(str(value)) <= 2048
        assert len(span.name) <= 300


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    arguments=st.one_of(
        st.text(max_size=200),
        st.binary(max_size=200),
        st.dictionaries(st.text(max_size=20), st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
            lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
            max_leaves=20,
        ), max_size=5),
        st.lists(st.integers(), max_size=3),
        st.integers(),
    ),
    name=st.sampled_from(["pay", "pay ", "Pay", "", "p" * 300]),
)  # fmt: skip
def test_fuzzed_calls_always_end_with_a_verdict_and_a_span(arguments: Any, name: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = tg.Guard(tracer_provider=provider)

    @guard.tool(preconditions=[tg.Precondition("positive", lambda amount: amount > 0)])
    def pay(amount: int, memo: str = "") -> int:
        return amount

    with guard.trajectory("fuzz") as traj:
        result = guard.call(name, arguments)
    assert traj.length == 1 and len(traj.verdicts) == 1
    verdict = traj.verdicts[0]
    assert isinstance(result, tg.Rejection) == (not verdict.valid)
    (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert span.attributes["toolguard.valid"] is verdict.valid
    if not verdict.valid:
        assert verdict.cause in ("schema", "precondition")


# -- cancellation -----------------------------------------------------------------------------


def test_an_agent_side_timeout_is_cancelled_not_an_environment_failure(otel) -> None:
    guard = otel.guard()
    started = asyncio.Event

    @guard.tool
    async def slow(n: int) -> int:
        gate.set()
        await asyncio.Event().wait()  # never finishes by itself
        return n

    async def main() -> tg.Trajectory:
        global gate
        gate = started()
        async with otel.trajectory("timeout") as traj:
            task = asyncio.ensure_future(guard.acall("slow", {"n": 1}))
            await gate.wait()
            task.cancel()  # what asyncio.wait_for does when its time is up
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await guard.acall("slow2", {}) is not None  # an unknown tool: T = 2
        return traj

    traj = asyncio.run(main())
    first = traj.verdicts[0]
    assert (first.decision, first.valid) == ("cancelled", True)
    assert (traj.length, traj.first_error_depth) == (2, 2)  # only the unknown tool failed
    assert otel.summary("timeout").attributes["toolguard.trajectory.length"] == 2
    assert ended(otel)[0].attributes["toolguard.decision"] == "cancelled"


def test_wait_for_timeout_on_a_guarded_call(otel) -> None:
    guard = otel.guard()

    @guard.tool
    async def hang() -> None:
        await asyncio.Event().wait()

    async def main() -> tg.Trajectory:
        async with otel.trajectory("wait_for") as traj:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(guard.acall("hang"), timeout=0.01)
        return traj

    traj = asyncio.run(main())
    assert [v.decision for v in traj.verdicts] == ["cancelled"]
    assert traj.first_error_depth == 2


def test_a_batch_cancelled_before_its_calls_start_leaves_no_open_span(otel) -> None:
    guard = otel.guard()

    @guard.tool
    async def work(n: int) -> int:
        await asyncio.Event().wait()
        return n

    async def main() -> tg.Trajectory:
        async with otel.trajectory("batch") as traj:
            task = asyncio.ensure_future(guard.acall_batch([("work", {"n": i}) for i in range(3)]))
            await asyncio.sleep(0)  # the batch is checked and its calls scheduled...
            task.cancel()  # ...and cancelled before any of them ran its first step
            with pytest.raises(asyncio.CancelledError):
                await task
        return traj

    traj = asyncio.run(main())
    assert sorted(s.attributes["toolguard.decision"] for s in ended(otel)) == ["cancelled"] * 3
    assert [v.decision for v in traj.verdicts] == ["cancelled"] * 3
    assert (traj.length, traj.first_error_depth) == (3, 4)


def test_ctrl_c_inside_a_predicate_ends_the_span_and_cancels_the_call(otel) -> None:
    guard = otel.guard()

    def interrupted(x: int) -> bool:
        raise KeyboardInterrupt  # what Ctrl-C raises while the predicate runs

    @guard.tool(preconditions=[tg.Precondition("p", interrupted)])
    def f(x: int) -> int:
        return x

    with otel.trajectory("ctrl-c") as traj:
        with pytest.raises(KeyboardInterrupt):
            guard.call("f", {"x": 1})
        assert guard.call("f", {"x": "bad"}).cause == "schema"
    assert [v.decision for v in traj.verdicts] == ["cancelled", "blocked"]
    assert (traj.length, traj.first_error_depth) == (2, 2)
    assert len(ended(otel)) == 2


# -- lost contexts ----------------------------------------------------------------------------


def test_run_in_executor_is_told_it_runs_outside_any_trajectory(otel, caplog) -> None:
    guard = otel.guard()

    @guard.tool(refs={"order_id": "order_id"})
    def cancel(order_id: str) -> str:
        return order_id

    async def main() -> Any:
        async with otel.trajectory("executor") as traj:
            loop = asyncio.get_running_loop()
            with caplog.at_level(logging.WARNING, logger="toolguard"):
                # Executor threads do not get the context: the call cannot see the trajectory.
                unchecked = await loop.run_in_executor(None, lambda: cancel("never-produced"))
                # The fix the warning names: pass the trajectory (or activate it).
                checked = await loop.run_in_executor(
                    None, lambda: guard.call("cancel", {"order_id": "x"}, trajectory=traj)
                )
        return traj, unchecked, checked

    traj, unchecked, checked = asyncio.run(main())
    assert unchecked == "never-produced"
    assert "outside any trajectory" in caplog.text and "activate" in caplog.text
    assert checked.cause == "dependency" and traj.length == 1


# -- strictness -------------------------------------------------------------------------------


class Order(BaseModel):
    order_id: str
    quantity: int


@pytest.mark.parametrize("bad", [True, "42", 4.0, 4.5])
def test_an_integer_argument_is_judged_by_the_json_schema(otel, bad) -> None:
    guard = otel.guard()
    guard.register(lambda n: n, name="f", json_schema={
        "type": "object", "properties": {"n": {"type": "integer"}}})  # fmt: skip

    @guard.tool
    def g(n: int) -> int:
        return n

    assert guard.call("g", {"n": bad}).cause == "schema"
    if bad != 4.0:  # JSON Schema itself counts 4.0 as an integer
        assert guard.call("f", {"n": bad}).cause == "schema"


def test_undeclared_arguments_are_unknown_whatever_the_source(otel) -> None:
    guard = otel.guard()
    guard.register(
        lambda **kw: kw,
        name="by_schema",
        json_schema={"type": "object", "properties": {"a": {"type": "string"}}},
    )
    guard.register(lambda order_id, quantity: order_id, name="by_model", args_model=Order)
    assert guard.call("by_schema", {"a": "x", "b": 1}).check == "schema.args"
    rejected = guard.call("by_model", {"order_id": "o", "quantity": 1, "coupon": "FREE"})
    assert rejected.check == "schema.args" and "coupon" in rejected.message


class Size(enum.Enum):
    S = "s"


def test_json_carried_values_pass_strict_mode(otel) -> None:
    guard = otel.guard()

    @guard.tool
    def book(day: datetime.date, size: Size, seats: tuple[int, ...], price: float) -> str:
        return f"{day} {size.value} {seats} {price}"

    text = '{"day": "2026-11-30", "size": "s", "seats": [1, 2], "price": 3}'
    assert guard.call("book", text) == "2026-11-30 s (1, 2) 3.0"


def test_lax_coercion_is_a_switch(otel) -> None:
    guard = otel.guard(strict=False)
    guard.register(lambda **kw: kw, name="s", json_schema={
        "type": "object", "properties": {"a": {"type": "string"}}})  # fmt: skip

    @guard.tool
    def f(n: int) -> int:
        return n

    assert guard.call("f", {"n": "42"}) == 42
    assert guard.call("s", {"a": "x", "extra": 1}) == {"a": "x", "extra": 1}


# -- privacy ----------------------------------------------------------------------------------


def test_no_argument_or_result_value_reaches_spans_or_logs(otel, caplog) -> None:
    guard = otel.guard(state={"known": set()})

    @guard.tool(produces={"id": "item"})
    def make(label: str) -> dict:
        return {"id": f"item-{label}"}

    @guard.tool(refs={"item_id": "item"}, grounded=["note"],
                preconditions=[tg.Precondition("known", lambda guard_state, item_id: False)],
                postconditions=[tg.Postcondition("ok", lambda result: False)])  # fmt: skip
    def use(item_id: str, note: str = "") -> dict:
        return {"error": f"backend says {SECRET}"}

    @guard.tool
    def boom(x: str) -> None:
        raise ValueError(f"bad input {x}")

    @guard.tool(preconditions=[tg.Precondition("buggy", lambda x: {}[x])])
    def buggy(x: str) -> None:
        return None

    with caplog.at_level(logging.DEBUG, logger="toolguard"), otel.trajectory("p") as traj:
        traj.bind("item", SECRET, shown=False)
        guard.call("use", {"item_id": SECRET + "-x", "note": "n"})  # dependency
        guard.call("use", {"item_id": SECRET, "note": SECRET})  # precondition
        guard.call("make", {"label": 5})  # schema, with the value in pydantic's input
        guard.call("boom", {"x": SECRET})  # the tool raised, its text holds the argument
        guard.call("buggy", {"x": SECRET})  # a predicate that raised (guard error)
        log_guard = otel.guard(mode="log")
        never = tg.Postcondition("ok", lambda result: False)
        log_guard.register(use.__wrapped__, name="use", grounded=["note"], postconditions=[never])
        log_guard.call("use", {"item_id": "a", "note": SECRET})  # logged: information etc.
    telemetry = [json.dumps(dict(s.attributes), default=str) + (s.status.description or "")
                 + json.dumps([dict(e.attributes or {}) for e in s.events], default=str)
                 for s in otel.spans()]  # fmt: skip
    assert len(otel.call_spans()) == 6
    for text in telemetry:
        assert SECRET not in text
    assert SECRET not in caplog.text
    # The model may be shown what it sent, never a value bound without showing it.
    dependency = guard.call("use", {"item_id": "zzz", "note": "n"}, trajectory=traj)
    assert SECRET not in dependency.model_message


def test_record_content_opts_in_to_values(otel) -> None:
    guard = otel.guard(record_content=True)

    @guard.tool
    def boom(x: str) -> None:
        raise ValueError(f"bad input {x}")

    guard.call("boom", {"x": SECRET})
    a = otel.only_call().attributes
    assert SECRET in a["toolguard.message"] and SECRET in a["gen_ai.tool.call.arguments"]


def test_unknown_tool_messages_never_list_the_whole_tool_set(otel) -> None:
    guard = otel.guard()
    for name in ("admin_delete_all_users", "search", "send"):
        guard.register(lambda: None, name=name)
    message = guard.call("serch", {}).model_message
    assert "`search`" in message and "admin_delete_all_users" not in message


def test_thread_started_without_context_in_a_trajectory_counts_nowhere_but_warns(
    otel, caplog
) -> None:
    guard = otel.guard()
    guard.register(lambda: 1, name="f")
    out: list[Any] = []
    with otel.trajectory("main") as traj, caplog.at_level(logging.WARNING, logger="toolguard"):
        worker = threading.Thread(target=lambda: out.append(guard.call("f")))
        worker.start()
        worker.join()
    assert out == [1] and traj.length == 0
    assert "outside any trajectory" in caplog.text


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(depth=st.integers(1, 6000), container=st.sampled_from([list, dict]))
def test_a_grounded_argument_nested_at_any_depth_gets_a_verdict(
    depth: int, container: type
) -> None:
    guard = tg.Guard()

    @guard.tool(grounded=["q"])
    def search(q: Any) -> str:
        return "ok"

    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if container is list else {"k": value}
    with guard.trajectory("deep"):
        out = guard.call("search", {"q": value})
    assert isinstance(out, tg.Rejection) and out.cause == "information"
