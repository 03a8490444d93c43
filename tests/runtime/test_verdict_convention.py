"""One convention for every verdict: ``ok``, ``message`` for the developer, ``model_message``
for the model, and no truth value that says whether it passed (``if pending.rejection:``
keeps meaning "there is one"); and one trajectory constructor whose summary goes where the
guard's call spans go."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolguard as tg


def _guard(**options: Any) -> tuple[tg.Guard, Any]:
    guard = tg.Guard(**options)

    @guard.tool(refs={"contact_id": "contact_id"})
    def remove_contact(contact_id: str) -> dict[str, str]:
        return {"removed": contact_id}

    return guard, remove_contact


def _convention(verdict: Any) -> None:
    if isinstance(verdict, tg.PlanVerdict):
        with pytest.raises(TypeError, match=r"ask verdict\.ok"):
            bool(verdict)
    else:
        assert verdict  # an object that is there, passed or not
    if verdict.ok:
        assert verdict.message is None and verdict.model_message is None
    else:
        assert verdict.message and verdict.model_message


def test_a_rejection_is_there_whatever_it_says() -> None:
    """The pattern adapters and the docs use: a rejection present means do not run."""
    guard, _ = _guard()
    with guard.trajectory():
        pending = guard.check("remove_contact", {"contact_id": "+1-555-0100"})
        ran = False
        if pending.rejection:
            answer = str(pending.rejection)
        else:
            ran = True
    assert not ran and answer.startswith("Error: the call to `remove_contact` was rejected")


def test_call_verdicts_and_rejections_share_the_convention() -> None:
    guard, _ = _guard()
    with guard.trajectory() as traj:
        traj.bind("contact_id", "c-1")
        ok = guard.check("remove_contact", {"contact_id": "c-1"})
        assert ok.rejection is None
        verdict = ok.finish({"removed": "c-1"})
        bad = guard.call("remove_contact", {"contact_id": "+1-555-0100"})
    _convention(verdict)
    assert verdict.ok
    assert isinstance(bad, tg.Rejection)
    _convention(bad)
    assert not bad.ok
    # The developer's text shows the value that broke the check; the model's says how to fix it.
    assert bad.message != bad.model_message
    assert "+1-555-0100" in (bad.message or "")
    assert "Use one of the contact_id values you have" in bad.model_message
    assert str(bad).endswith(bad.model_message)
    _convention(traj.verdicts[1])
    assert traj.verdicts[1].model_message == bad.model_message


def test_plan_verdicts_share_the_convention() -> None:
    guard, _ = _guard()
    with guard.trajectory() as traj:
        traj.bind("contact_id", "c-1")
        passed = guard.verify_plan([{"tool": "remove_contact", "arguments": {"contact_id": "c-1"}}])
        failed = guard.verify_plan(
            [{"tool": "remove_contact", "arguments": {"contact_id": "+1-555-0100"}}]
        )
    _convention(passed)
    assert passed.ok
    for step in passed.steps:
        _convention(step)
    assert not failed.ok and failed.failed == 0
    assert failed.message and failed.model_message
    assert failed.message.startswith("steps[0] (`remove_contact`) would fail")
    assert failed.model_message.startswith("steps[0] (`remove_contact`) would fail")
    assert str(failed) == failed.model_message  # what to hand the planner
    _convention(failed.steps[0])
    assert failed.steps[0].model_message == failed.model_message


def test_a_failure_reads_as_not_ok_and_stays_an_object() -> None:
    failure = tg.Failure("schema", "schema.args", "dev", "model")
    assert failure.ok is False
    assert failure  # an object that is there: `if failure:` keeps meaning "one was found"


def _exporter() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_the_module_function_takes_the_guard_and_its_provider() -> None:
    provider, exporter = _exporter()
    guard, remove = _guard(tracer_provider=provider)
    with tg.trajectory("t-1", guard=guard) as traj:
        traj.bind("contact_id", "c-1")
        remove(contact_id="c-1")
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["execute_tool remove_contact", "toolguard.trajectory"]
    with pytest.raises(tg.UsageError, match="not both"):
        tg.trajectory(guard=guard, tracer_provider=provider)


def test_a_trajectory_on_another_provider_than_the_guards_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider, _exported = _exporter()
    other, _ = _exporter()
    guard, remove = _guard(tracer_provider=provider)
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        with tg.trajectory("split", tracer_provider=other) as traj:
            traj.bind("contact_id", "c-1")
            remove(contact_id="c-1")
            remove(contact_id="c-1")
        with guard.trajectory("joined") as traj:
            traj.bind("contact_id", "c-1")
            remove(contact_id="c-1")
        off = tg.Guard(tracer_provider=trace.NoOpTracerProvider())  # its calls make no spans

        @off.tool
        def ping() -> str:
            return "pong"

        with tg.trajectory("quiet", tracer_provider=other):
            ping()
    said = [r.getMessage() for r in caplog.records if "writes its summary" in r.getMessage()]
    assert len(said) == 1 and "'split'" in said[0]
    assert "tg.trajectory(..., guard=guard)" in said[0]
