"""One call at a time and a turn's parallel calls: steps, causes, what the model gets."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pydantic
import pytest
import toolguard as tg
from conftest import Telemetry, answers, chat, scripted
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from toolguard_google_adk import ToolGuardPlugin
from toolguard_google_adk._calls import refusal


def lookup(key: str) -> dict[str, str]:
    """Look a key up."""
    return {"id": f"item-{key}"}


def verdicts(traj: tg.Trajectory) -> list[tuple[int, str, bool, str | None]]:
    return sorted((v.step, v.tool, v.valid, v.check) for v in traj.verdicts)


class HoldFirst(BasePlugin):
    """A plugin ahead of the guard whose before-tool callback awaits (an approval, a rate
    limit): the turn's first call reaches the guard only after the third."""

    def __init__(self) -> None:
        super().__init__("hold")
        self.third_seen = asyncio.Event()
        self.order: list[str] = []

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: Any
    ) -> None:
        if tool_args.get("key") == "a":
            await self.third_seen.wait()
        if tool_args.get("key") == "c":
            self.third_seen.set()
        self.order.append(tool_args["key"])
        return None


def test_parallel_calls_take_steps_in_emission_order(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted([("lookup", {"key": "a"}), ("lookup", {"key": "b"}), ("lookup", {"key": "c"})])
    hold = HoldFirst()
    agent = LlmAgent(name="a", model=model, tools=[lookup])
    with guard.trajectory("parallel") as traj:
        events = chat(agent, [hold, ToolGuardPlugin(guard)]).send("go")
    assert hold.order == ["b", "c", "a"]  # the guard checked them in this order
    # Each call's step is its place in the model's turn.
    calls = [c for e in events for c in e.get_function_calls()]
    step_by_id = {v.call_id: v.step for v in traj.verdicts}
    assert [step_by_id[c.id] for c in calls] == [1, 2, 3]
    spans = {
        s.attributes["gen_ai.tool.call.id"]: s.attributes["toolguard.step"]
        for s in otel.call_spans()
    }
    assert [spans[c.id] for c in calls] == [1, 2, 3]


def test_an_unknown_tool_is_a_schema_step_and_adk_answers_it(otel: Telemetry, mode: str) -> None:
    guard = otel.guard()
    model = scripted([("lookup", {"key": "k"}), ("lokup", {"key": "k"})])
    agent = LlmAgent(name="a", model=model, tools=[lookup])
    with guard.trajectory("unknown") as traj:
        events = chat(agent, [ToolGuardPlugin(guard)]).send("go", mode)
    assert verdicts(traj) == [(1, "lookup", True, None), (2, "lokup", False, "schema.tool")]
    assert traj.first_error_cause == "schema"
    # The run goes on: ADK's own answer lists the tools the model can call.
    unknown = answers(events)[1].response
    assert unknown is not None and "The tools you can call are: lookup" in unknown["error"]
    assert events[-1].content is not None and events[-1].content.parts[0].text == "done"


def test_the_unknown_tool_stand_in_is_a_bare_base_tool() -> None:
    # The plugin recognises ADK's stand-in for an unknown name by its type: pinned here.
    assert type(FunctionTool(lookup)) is not BaseTool
    from google.adk.flows.llm_flows.tools import _caller

    source = Path(_caller.__file__).read_text(encoding="utf-8")
    assert "BaseTool(\n        name=function_call.name" in source


class Booking(pydantic.BaseModel):
    nights: int

    @pydantic.field_validator("nights")
    @classmethod
    def positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError("at least one night")
        return value


def test_arguments_adk_refuses_are_a_schema_step(
    otel: Telemetry, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ADK's own argument validation (experimental in 2.13, off by default).
    monkeypatch.setenv("ADK_ENABLE_FUNCTION_TOOL_ARG_VALIDATION", "1")
    ran: list[int] = []

    def book(booking: Booking) -> dict[str, int]:
        """Book some nights."""
        ran.append(booking.nights)
        return {"nights": booking.nights}

    guard = otel.guard()
    # The JSON Schema cannot say "at least one": ADK's own validation refuses the first call.
    model = scripted([("book", {"booking": {"nights": 0}})], [("book", {"booking": {"nights": 2}})])
    agent = LlmAgent(name="a", model=model, tools=[book])
    with guard.trajectory("refused") as traj:
        events = chat(agent, [ToolGuardPlugin(guard)]).send("book", mode)
    assert ran == [2]
    assert verdicts(traj) == [(1, "book", False, "schema.args"), (2, "book", True, None)]
    first = answers(events)[0].response
    assert first is not None and "failed due to argument validation errors" in first["error"]
    (span,) = [s for s in otel.call_spans() if s.attributes["toolguard.step"] == 1]
    assert span.attributes["toolguard.cause"] == "schema"
    assert "nights" not in str(span.attributes["toolguard.message"])  # no values, no names


def test_a_missing_argument_is_refused_by_the_guard_before_adk(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted([("lookup", {})])
    with guard.trajectory("missing") as traj:
        events = chat(
            LlmAgent(name="a", model=model, tools=[lookup]), [ToolGuardPlugin(guard)]
        ).send("go")
    assert verdicts(traj) == [(1, "lookup", False, "schema.args")]
    answer = answers(events)[0].response
    assert answer is not None and answer["error"].startswith(
        "Error: the call to `lookup` was rejected (schema)"
    )


def test_adks_refusal_texts_are_recognised() -> None:
    # The texts FunctionTool answers with, produced by the installed ADK itself.
    tool = FunctionTool(lookup)
    assert refusal(tool, tool._build_validation_error_response(["key: bad"])) is not None
    assert (
        refusal(
            tool,
            {
                "error": "Invoking `lookup()` failed as the following mandatory input"
                " parameters are not present:\nkey"
            },
        )
        is not None
    )
    assert refusal(tool, {"error": "the service is down"}) is None
    assert refusal(tool, {"result": 1}) is None


def test_a_tool_that_raises_is_state_consistency_delivered_to_the_model(
    otel: Telemetry, mode: str
) -> None:
    def explode(key: str) -> dict[str, str]:
        """Fails."""
        raise RuntimeError(f"secret {key}")

    guard = otel.guard()
    model = scripted([("explode", {"key": "k1"})])
    with guard.trajectory("raises") as traj:
        events = chat(
            LlmAgent(name="a", model=model, tools=[explode]), [ToolGuardPlugin(guard)]
        ).send("go", mode)
    assert verdicts(traj) == [(1, "explode", False, "state.exception")]
    answer = answers(events)[0].response
    assert answer is not None and "(state_consistency)" in answer["error"]
    assert events[-1].content is not None and events[-1].content.parts[0].text == "done"
    (span,) = otel.call_spans()
    assert span.attributes["toolguard.decision"] == "allowed"
    assert "k1" not in str(span.attributes)  # the exception's text is not recorded


def test_tool_errors_raise_keeps_adks_behaviour(otel: Telemetry) -> None:
    def explode(key: str) -> dict[str, str]:
        """Fails."""
        raise RuntimeError("boom")

    guard = otel.guard()
    model = scripted([("explode", {"key": "k"})])
    plugin = ToolGuardPlugin(guard, tool_errors="raise", trajectory_id=lambda ctx: "dies")
    with pytest.raises(RuntimeError, match="boom"):
        chat(LlmAgent(name="a", model=model, tools=[explode]), [plugin]).send("go")
    summary = otel.summary("dies").attributes
    assert summary["toolguard.trajectory.length"] == 1
    assert summary["toolguard.trajectory.first_error.cause"] == "state_consistency"
    assert "toolguard.trajectory.success" not in summary


def test_an_error_result_is_state_consistency(otel: Telemetry) -> None:
    def flaky(key: str) -> dict[str, str]:
        """Reports an error."""
        return {"error": "the service is down"}

    guard = otel.guard()
    model = scripted([("flaky", {"key": "k"})])
    with guard.trajectory("error-result") as traj:
        events = chat(
            LlmAgent(name="a", model=model, tools=[flaky]), [ToolGuardPlugin(guard)]
        ).send("go")
    assert verdicts(traj) == [(1, "flaky", False, "state.error_result")]
    assert answers(events)[0].response == {"error": "the service is down"}  # the tool's own


def test_log_mode_runs_the_invalid_call_and_records_it(otel: Telemetry, mode: str) -> None:
    removed: list[str] = []

    async def remove(contact_id: str) -> dict[str, str]:
        """Remove a contact (async tool)."""
        removed.append(contact_id)
        return {"removed": contact_id}

    guard = otel.guard(mode="log")
    model = scripted([("remove", {"contact_id": "made-up"})])
    plugin = ToolGuardPlugin(guard, contracts={"remove": {"refs": {"contact_id": "contact_id"}}})
    with guard.trajectory("logged") as traj:
        chat(LlmAgent(name="a", model=model, tools=[remove]), [plugin]).send("go", mode)
    assert removed == ["made-up"]
    (verdict,) = traj.verdicts
    assert (verdict.valid, verdict.cause, verdict.decision) == (False, "dependency", "logged")
    (span,) = otel.call_spans()
    assert span.attributes["toolguard.decision"] == "logged"


def test_call_ids_reused_in_later_turns_keep_every_step(otel: Telemetry) -> None:
    # Some OpenAI-compatible servers number calls per turn (call_0, call_1, ...).
    guard = otel.guard()
    model = scripted(
        [("lookup", {"key": "a"}), ("missing", {})],
        [("lookup", {"key": "b"}), ("lookup", {})],
        ids=True,
    )
    with guard.trajectory("reused") as traj:
        chat(LlmAgent(name="a", model=model, tools=[lookup]), [ToolGuardPlugin(guard)]).send("go")
    assert verdicts(traj) == [
        (1, "lookup", True, None),
        (2, "missing", False, "schema.tool"),
        (3, "lookup", True, None),
        (4, "lookup", False, "schema.args"),
    ]
    assert traj.length == 4


def test_a_tool_declared_on_the_guard_is_used_as_declared(otel: Telemetry) -> None:
    guard = otel.guard()
    guard.declare("lookup", json_schema={"type": "object", "properties": {"key": {"enum": ["ok"]}}})
    model = scripted([("lookup", {"key": "nope"})])
    with guard.trajectory("declared") as traj:
        chat(LlmAgent(name="a", model=model, tools=[lookup]), [ToolGuardPlugin(guard)]).send("go")
    assert verdicts(traj) == [(1, "lookup", False, "schema.args")]


def test_a_tool_taking_adks_context_is_not_asked_for_it(otel: Telemetry) -> None:
    """ADK passes a function tool its ToolContext itself (by type, else by the name
    ``tool_context``), left out of the declaration the model is shown: the guard never
    requires it, so the legal call passes."""
    got: list[tuple[str, str | None]] = []

    def note(text: str, tool_context: ToolContext) -> dict[str, str]:
        """Keep a note."""
        got.append((text, tool_context.function_call_id))
        return {"noted": text}

    def recall(ctx: ToolContext) -> dict[str, str]:
        """The notes."""
        got.append(("recall", ctx.function_call_id))
        return {"notes": "hi"}

    guard = otel.guard()
    model = scripted([("note", {"text": "hi"}), ("recall", {})])
    agent = LlmAgent(name="a", model=model, tools=[note, recall])
    with guard.trajectory("context") as traj:
        events = chat(agent, [ToolGuardPlugin(guard)]).send("go")
    calls = {c.name: c.id for e in events for c in e.get_function_calls()}
    assert sorted(got) == [("hi", calls["note"]), ("recall", calls["recall"])]
    assert verdicts(traj) == [(1, "note", True, None), (2, "recall", True, None)]


def test_a_streamed_turn_counts_its_calls_once(otel: Telemetry) -> None:
    # A streaming model's partial event carries the turn's calls too, with ids ADK gives them
    # afresh in the final event; ADK runs only the final event's calls.
    guard = otel.guard()
    model = scripted([("lookup", {"key": "a"}), ("lookup", {"key": "b"})], partial=True)
    session = chat(LlmAgent(name="a", model=model, tools=[lookup]), [ToolGuardPlugin(guard)])
    with guard.trajectory("streamed") as traj:
        events = asyncio.run(session.asend("go", RunConfig(streaming_mode=StreamingMode.SSE)))
    assert any(e.partial and e.get_function_calls() for e in events)  # the model streamed
    assert traj.length == 2
    assert verdicts(traj) == [(1, "lookup", True, None), (2, "lookup", True, None)]


def test_calls_paused_for_a_confirmation_are_the_turns_only_steps(otel: Telemetry) -> None:
    # ADK asks the client to confirm each call in an event of its own, whose calls
    # (adk_request_confirmation) the client answers: no tool runs them.
    def pay(amount: int) -> dict[str, int]:
        """Pay an amount."""
        return {"paid": amount}

    plugin = ToolGuardPlugin(otel.guard())
    model = scripted([("pay", {"amount": 1}), ("pay", {"amount": 2})], "confirmed")
    tool = FunctionTool(pay, require_confirmation=True)
    session = chat(LlmAgent(name="a", model=model, tools=[tool]), [plugin])
    asked = [
        c
        for e in asyncio.run(session.asend("go"))
        for c in e.get_function_calls()
        if c.name == "adk_request_confirmation"
    ]
    assert len(asked) == 2
    ((summary, paused_id),) = [
        (s.attributes, s.attributes["toolguard.trajectory.id"]) for s in otel.summaries()
    ]
    assert summary["toolguard.trajectory.length"] == 2
    assert "toolguard.trajectory.first_error.cause" not in summary
    assert {s.attributes["gen_ai.tool.name"] for s in otel.call_spans()} == {"pay"}
    # Confirmed, the two calls run in the run the client's answer starts: its own steps.
    otel.exporter.clear()
    confirm = [
        types.Part(
            function_response=types.FunctionResponse(
                name=c.name, id=c.id, response={"confirmed": True}
            )
        )
        for c in asked
    ]
    events = asyncio.run(session.asend_content(types.Content(role="user", parts=confirm)))
    assert sorted(r.response["paid"] for r in answers(events)) == [1, 2]
    # The client's answer resumes the paused calls' invocation: a trajectory of its own.
    resumed = otel.summary(f"{paused_id}#2").attributes
    assert resumed["toolguard.trajectory.length"] == 2
    assert sorted(
        (s.attributes["gen_ai.tool.name"], s.attributes["toolguard.decision"])
        for s in otel.call_spans()
    ) == [("pay", "allowed"), ("pay", "allowed")]


def test_a_denied_confirmation_ends_the_call_cancelled(otel: Telemetry) -> None:
    # The client denies the confirmation ADK asked for: ADK's gate answers the call
    # ("rejected") and the tool never runs. The call is cut short, not a tool that failed.
    ran: list[int] = []

    def pay(amount: int) -> dict[str, int]:
        """Pay an amount."""
        ran.append(amount)
        return {"paid": amount}

    plugin = ToolGuardPlugin(otel.guard())
    model = scripted([("pay", {"amount": 1})], "asked", "denied")
    tool = FunctionTool(pay, require_confirmation=True)
    session = chat(LlmAgent(name="a", model=model, tools=[tool]), [plugin])
    (asked,) = [
        c
        for e in asyncio.run(session.asend("go"))
        for c in e.get_function_calls()
        if c.name == "adk_request_confirmation"
    ]
    (paused_id,) = [s.attributes["toolguard.trajectory.id"] for s in otel.summaries()]
    otel.exporter.clear()
    deny = types.Part(
        function_response=types.FunctionResponse(
            name=asked.name, id=asked.id, response={"confirmed": False}
        )
    )
    events = asyncio.run(session.asend_content(types.Content(role="user", parts=[deny])))
    assert ran == []
    assert [r.response for r in answers(events)] == [{"error": "This tool call is rejected."}]
    resumed = otel.summary(f"{paused_id}#2").attributes
    assert resumed["toolguard.trajectory.length"] == 1
    assert resumed["toolguard.trajectory.first_error_depth"] == 2
    assert "toolguard.trajectory.first_error.cause" not in resumed
    ((attrs),) = [s.attributes for s in otel.call_spans()]
    assert (attrs["gen_ai.tool.name"], attrs["toolguard.decision"]) == ("pay", "cancelled")
    assert attrs["toolguard.valid"] is True
    assert "toolguard.cause" not in attrs


def test_a_tool_that_asks_its_own_confirmation_answers_a_denial_itself(otel: Telemetry) -> None:
    # A tool asking for its confirmation itself runs again on the client's answer, a denial
    # too: what it returns then is its result, judged as any other.
    def send(to: str, tool_context: ToolContext) -> dict[str, str]:
        """Send a message."""
        confirmation = tool_context.tool_confirmation
        if confirmation is None:
            tool_context.request_confirmation(hint="send it?")
            return {"status": "waiting"}
        return {"status": "sent" if confirmation.confirmed else "kept"}

    plugin = ToolGuardPlugin(otel.guard())
    session = chat(
        LlmAgent(name="a", model=scripted([("send", {"to": "bob"})], "asked"), tools=[send]),
        [plugin],
    )
    (asked,) = [
        c
        for e in asyncio.run(session.asend("go"))
        for c in e.get_function_calls()
        if c.name == "adk_request_confirmation"
    ]
    otel.exporter.clear()
    deny = types.Part(
        function_response=types.FunctionResponse(
            name=asked.name, id=asked.id, response={"confirmed": False}
        )
    )
    events = asyncio.run(session.asend_content(types.Content(role="user", parts=[deny])))
    assert [r.response for r in answers(events)] == [{"status": "kept"}]
    ((attrs),) = [s.attributes for s in otel.call_spans()]
    assert (attrs["toolguard.decision"], attrs["toolguard.valid"]) == ("allowed", True)
