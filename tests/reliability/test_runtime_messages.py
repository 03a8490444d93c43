"""Every text the guard renders stays bounded, whatever size of name or value it echoes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolguard as tg

MODEL_TEXT = 2300  # str(rejection): the model message (2,000) and a shortened tool name
DEVELOPER_TEXT = 1400  # a ToolCallRejected's text: the message (1,024), name, cause, check
LINE = 2300  # a log line
ATTRIBUTE = 2048  # a span attribute's text (the trajectory id is the id, not a message)


# What a message says around the value it echoes, which a cut of the whole message lost.
MUST_SAY = {
    "direct_call": ["Call it again with arguments matching `pay(amount: integer)`"],
    "plan": ["reuses the id 'xxx", "' of steps[0].", "but the first step has no earlier step"],
}


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def scenarios(huge: str) -> dict[str, Callable[[tg.Guard], list[Any]]]:
    """Each makes the guard echo ``huge`` somewhere; returns what it rendered."""

    def unknown_tool(guard: tg.Guard) -> list[Any]:
        with guard.trajectory("t"):
            return [guard.call("pay" + huge, {"amount": 1})]

    def unknown_argument(guard: tg.Guard) -> list[Any]:
        return [guard.call("pay", {"amount": 1, huge: 2})]

    def ill_typed_value(guard: tg.Guard) -> list[Any]:
        return [guard.call("pay", {"amount": huge})]

    def framework_rejection(guard: tg.Guard) -> list[Any]:
        with guard.trajectory("t"):
            return [guard.record_rejection(huge, "bad " + huge, model_message=huge)]

    def tool_raised(guard: tg.Guard) -> list[Any]:
        return [guard.call("fail", {"text": huge})]

    def error_result(guard: tg.Guard) -> list[Any]:
        with guard.trajectory("t") as traj:
            guard.call("answer", {"text": huge})  # the result goes back as it is
        return traj.verdicts

    def direct_call(guard: tg.Guard) -> list[Any]:
        with pytest.raises(tg.ToolCallRejected) as raised:
            guard._tools["pay"][1](1, **{huge: 2})  # type: ignore[misc]
        return [raised.value.rejection, raised.value]

    def stale_reference(guard: tg.Guard) -> list[Any]:
        with guard.trajectory(huge) as traj:
            traj.bind("account", "a" + huge)
            return [guard.call("close", {"account": huge}), guard.call("close", {"account": "b"})]

    def call_id(guard: tg.Guard) -> list[Any]:
        with guard.trajectory("t"):
            return [guard.call("pay", {"amount": -1}, call_id=huge)]

    def outside_and_after(guard: tg.Guard) -> list[Any]:
        traj = guard.trajectory("t").start()
        other = guard.trajectory("u")
        with other:
            pass
        traj.end()
        with other.activate():
            return [guard.call(huge)]

    def plan(guard: tg.Guard) -> list[Any]:
        with guard.trajectory("t"):
            return [
                guard.verify_plan([{"tool": huge, "arguments": {}}]),
                guard.verify_plan([{"tool": "pay", "arguments": {"amount": 1}, "id": huge}] * 2),
                guard.verify_plan([{"tool": "close", "arguments": {"account": {"$step": huge}}}]),
                guard.verify_plan(
                    [
                        {"tool": "answer", "arguments": {"text": "x"}},
                        {"tool": "close", "arguments": {huge: {"$step": 0, "path": huge}}},
                    ],
                    dry_run=True,
                ),
            ]

    return {
        f.__name__: f
        for f in (
            unknown_tool,
            unknown_argument,
            ill_typed_value,
            framework_rejection,
            tool_raised,
            error_result,
            direct_call,
            stale_reference,
            call_id,
            outside_and_after,
            plan,
        )
    }


def the_guard(provider: TracerProvider) -> tg.Guard:
    guard = tg.Guard(tracer_provider=provider)

    @guard.tool(preconditions=[tg.Precondition("positive", lambda amount: amount > 0)])
    def pay(amount: int) -> int:
        return amount

    @guard.tool
    def fail(text: str) -> None:
        raise ValueError(text)

    @guard.tool
    def answer(text: str) -> dict[str, str]:
        return {"error": text}

    @guard.tool(refs={"account": "account"})
    def close(account: str) -> str:
        return account

    return guard


@pytest.mark.parametrize("scenario", sorted(scenarios("")))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(3_000, 3_000_000))
def test_every_rendered_text_is_bounded(scenario: str, size: int) -> None:
    huge = "x" * size
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = the_guard(provider)
    lines = Lines()
    logger = logging.getLogger("toolguard")
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    try:
        rendered = scenarios(huge)[scenario](guard)
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    assert rendered
    texts = []
    for item in rendered:
        if isinstance(item, tg.Rejection):
            assert len(str(item)) <= MODEL_TEXT
            assert len(item.model_message) <= 2001 and len(item.message) <= 1025
            texts += [str(item), item.message]
        elif isinstance(item, tg.Verdict):
            assert len(item.message or "") <= 1025
            texts.append(item.message or "")
        elif isinstance(item, tg.ToolCallRejected):
            assert len(str(item)) <= DEVELOPER_TEXT
            texts.append(str(item))
        else:
            assert isinstance(item, tg.PlanVerdict)
            assert len(str(item)) <= 2001
            assert all(len(s.message or "") <= 2001 for s in item.steps)
            texts.append(str(item))
    for phrase in MUST_SAY.get(scenario, []):
        assert any(phrase in text for text in texts), phrase
    assert all(len(line) <= LINE for line in lines.lines)
    for span in exporter.get_finished_spans():
        assert len(span.name) <= 300
        assert len(span.status.description or "") <= 300
        for key, value in span.attributes.items():
            if key != "toolguard.trajectory.id":
                assert len(str(value)) <= ATTRIBUTE, key
    provider.shutdown()
