"""Dispatch by name: dict and JSON arguments, bad JSON, unknown tools, acall, acall_batch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode

import toolguard as tg


def make_guard(otel, **options):
    guard = otel.guard(**options)

    @guard.tool
    def search_contact(phone: str) -> list[dict]:
        return [{"id": "id_1", "phone": phone}]

    @guard.tool
    def remove_contact(contact_id: str) -> dict:
        return {"removed": contact_id}

    @guard.tool
    def send_message(contact_id: str, text: str) -> str:
        return f"sent {text!r} to {contact_id}"

    return guard


def test_call_with_dict_and_json(otel):
    guard = make_guard(otel)
    assert guard.call("remove_contact", {"contact_id": "id_1"}) == {"removed": "id_1"}
    assert guard.call("remove_contact", '{"contact_id": "id_2"}') == {"removed": "id_2"}
    assert guard.call("remove_contact", b'{"contact_id": "id_3"}') == {"removed": "id_3"}
    assert [s.attributes["toolguard.valid"] for s in otel.call_spans()] == [True] * 3


def test_call_id_is_recorded(otel):
    guard = make_guard(otel)
    guard.call("remove_contact", {"contact_id": "id_1"}, call_id="call_abc")
    assert otel.only_call().attributes["gen_ai.tool.call.id"] == "call_abc"


def test_no_arguments(otel):
    guard = otel.guard()

    @guard.tool
    def now() -> str:
        return "noon"

    assert guard.call("now") == "noon"
    assert guard.call("now", "") == "noon"
    assert guard.call("now", "{}") == "noon"


@pytest.mark.parametrize("text", ['{"contact_id": ', "not json", "{'contact_id': 'x'}"])
def test_malformed_json_is_schema_json(otel, text):
    guard = make_guard(otel)
    with otel.trajectory("t"):
        rejection = guard.call("remove_contact", text)
    assert isinstance(rejection, tg.Rejection)
    assert rejection.cause == "schema"
    assert rejection.check == "schema.json"
    assert "JSON" in rejection.model_message
    span = otel.only_call()
    a = span.attributes
    assert span.name == "execute_tool remove_contact"
    assert a["toolguard.check"] == "schema.json"
    assert a["toolguard.decision"] == "blocked"
    assert a["toolguard.step"] == 1
    assert span.status.status_code is StatusCode.ERROR
    assert otel.summary("t").attributes["toolguard.trajectory.first_error.cause"] == "schema"


@pytest.mark.parametrize("text", ["[1, 2]", '"id_1"', "42", "null"])
def test_non_object_json_is_schema_json(otel, text):
    guard = make_guard(otel)
    rejection = guard.call("remove_contact", text)
    assert rejection.check == "schema.json"
    assert "JSON object" in rejection.model_message


@pytest.mark.parametrize("arguments", [[1, 2], 42, 4.5, object()])
def test_arguments_of_a_wrong_python_type_are_schema_json(otel, arguments):
    guard = make_guard(otel)
    rejection = guard.call("remove_contact", arguments)
    assert isinstance(rejection, tg.Rejection)
    assert rejection.check == "schema.json"
    assert type(arguments).__name__ in rejection.message


@pytest.mark.parametrize("name", [None, 42, ["remove_contact"]])
def test_a_tool_name_that_is_not_a_string_is_a_usage_error(otel, name):
    guard = make_guard(otel)
    with pytest.raises(tg.UsageError, match="tool name must be a string"):
        guard.call(name, {})
    with pytest.raises(tg.UsageError, match="tool name must be a string"):
        guard.check(name, {})
    assert otel.call_spans() == []


def test_malformed_json_in_log_mode_is_still_blocked(otel):
    # There is nothing to execute: the call cannot run, whatever the mode.
    guard = make_guard(otel, mode="log")
    assert isinstance(guard.call("remove_contact", "{"), tg.Rejection)
    assert otel.only_call().attributes["toolguard.decision"] == "blocked"


def test_unknown_tool_is_schema_tool_with_close_names(otel):
    guard = make_guard(otel)
    with otel.trajectory("t"):
        exc = guard.call("remove_contacts", {"contact_id": "id_1"})
    assert exc.cause == "schema"
    assert exc.check == "schema.tool"
    assert exc.tool == "remove_contacts"
    assert "Did you mean `remove_contact`" in exc.model_message
    # Only the closest names: the tool set may hold tools this agent was not offered.
    assert "`send_message`" not in exc.model_message
    span = otel.only_call()
    assert span.name == "execute_tool remove_contacts"
    assert span.attributes["gen_ai.tool.name"] == "remove_contacts"
    assert span.attributes["toolguard.check"] == "schema.tool"
    assert span.attributes["toolguard.decision"] == "blocked"
    assert span.attributes["toolguard.step"] == 1


def test_unknown_tool_without_close_names(otel):
    guard = make_guard(otel)
    rejection = guard.call("zzz", {})
    assert "Did you mean" not in rejection.model_message
    assert "`send_message`" not in rejection.model_message


def test_unknown_tool_returns_a_rejection(otel):
    guard = make_guard(otel)
    result = guard.call("delete_everything", "{}")
    assert isinstance(result, tg.Rejection)
    assert result.check == "schema.tool"
    assert "delete_everything" in str(result)


def test_acall_sync_and_async_tools(otel):
    guard = make_guard(otel)

    @guard.tool
    async def slow_echo(text: str) -> str:
        await asyncio.sleep(0)
        return text

    async def main():
        a = await guard.acall("remove_contact", '{"contact_id": "id_1"}')
        b = await guard.acall("slow_echo", {"text": "hi"})
        assert isinstance(await guard.acall("slow_echo", {"text": 1}), tg.Rejection)
        assert isinstance(await guard.acall("nope", {}), tg.Rejection)
        return a, b

    assert asyncio.run(main()) == ({"removed": "id_1"}, "hi")
    assert [s.attributes["toolguard.valid"] for s in otel.call_spans()] == [
        True,
        True,
        False,
        False,
    ]


class OnEnd(SpanProcessor):
    """Calls ``fn`` with every span as it ends."""

    def __init__(self, fn: Callable[[ReadableSpan], None]) -> None:
        self.fn = fn

    def on_end(self, span: ReadableSpan) -> None:
        self.fn(span)


def test_acall_batch_steps_follow_list_order(otel):
    # The calls finish in an order the test chooses (second, third, first): each is held on an
    # event until the call released before it has ended its span. No race and no sleep length
    # decides the order, so the test shows steps follow the list, not completion.
    guard = otel.guard()
    finished: list[str] = []
    gates: dict[str, asyncio.Event] = {}
    ended_calls: list[ReadableSpan] = []
    call_ended = asyncio.Event()

    def on_end(span: ReadableSpan) -> None:
        if span.name.startswith("execute_tool "):
            ended_calls.append(span)
            call_ended.set()

    otel.provider.add_span_processor(OnEnd(on_end))

    @guard.tool
    async def wait(label: str) -> str:
        if label in gates:
            await gates[label].wait()
        finished.append(label)
        return label

    async def release(order: list[str]) -> None:
        for label in order:
            goal = len(ended_calls) + 1
            gates[label].set()
            while len(ended_calls) < goal:
                call_ended.clear()
                await call_ended.wait()

    async def main():
        gates.update((label, asyncio.Event()) for label in ("first", "second", "third"))
        async with otel.trajectory("batch") as traj:
            before = await guard.acall("wait", {"label": "before"})
            releasing = asyncio.ensure_future(release(["second", "third", "first"]))
            batch = await guard.acall_batch(
                [
                    ("wait", {"label": "first"}),
                    ("wait", '{"label": "second"}', "call_2"),
                    ("wait", {"label": "third"}),
                ]
            )
            await releasing
            after = await guard.acall("wait", {"label": "after"})
            traj.success = True
        return before, batch, after

    before, batch, after = asyncio.run(main())
    assert batch == ["first", "second", "third"]  # results in list order
    assert (before, after) == ("before", "after")
    assert finished == ["before", "second", "third", "first", "after"]  # finished out of order
    spans = otel.call_spans("batch")
    # Spans end in completion order, but steps are the emission order.
    assert sorted(s.attributes["toolguard.step"] for s in spans) == [1, 2, 3, 4, 5]
    ended = [s.attributes["toolguard.step"] for s in spans]
    assert ended == [1, 3, 4, 2, 5]
    assert spans[1].attributes["gen_ai.tool.call.id"] == "call_2"
    summary = otel.summary("batch").attributes
    assert summary["toolguard.trajectory.length"] == 5
    assert summary["toolguard.trajectory.first_error_depth"] == 6
    assert summary["toolguard.trajectory.success"] is True


def test_acall_batch_rejections_keep_their_steps(otel):
    guard = otel.guard()

    @guard.tool
    async def wait(delay: float) -> float:
        await asyncio.sleep(delay)
        return delay

    async def main():
        async with otel.trajectory("b2"):
            return await guard.acall_batch(
                [("wait", {"delay": 0.02}), ("nope", {}), ("wait", "{bad json")]
            )

    results = asyncio.run(main())
    assert results[0] == 0.02
    assert isinstance(results[1], tg.Rejection) and results[1].check == "schema.tool"
    assert isinstance(results[2], tg.Rejection) and results[2].check == "schema.json"
    assert (results[1].step, results[2].step) == (2, 3)
    steps = {s.attributes["toolguard.step"]: s for s in otel.call_spans("b2")}
    assert sorted(steps) == [1, 2, 3]
    assert steps[2].attributes["toolguard.check"] == "schema.tool"
    summary = otel.summary("b2").attributes
    assert summary["toolguard.trajectory.first_error_depth"] == 2
    assert summary["toolguard.trajectory.length"] == 3
