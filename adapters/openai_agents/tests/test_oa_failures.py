"""What goes wrong: a tool that raises, log mode, calls to tools the agent does not have,
arguments that do not parse."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import (
    Agent,
    ModelBehaviorError,
    RunConfig,
    ToolGuardrailFunctionOutput,
    UserError,
    function_tool,
    tool_input_guardrail,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_contacts import (
    CONTACT_ID,
    CONTRACTS,
    PHONE,
    address_book,
    contact_tools,
    contacts_agent,
)
from oa_support import Episode, Telemetry, tool_outputs
from opentelemetry.trace import StatusCode

from toolguard_openai_agents import guard_agent

SDK_DEFAULT_ERROR = "An error occurred while running the tool. Please try again."


def exploding_agent(script: list[Any], **tool_options: Any) -> tuple[Agent[Any], ScriptedModel]:
    @function_tool(**tool_options)
    def explode(level: int) -> str:
        """Set the reactor level."""
        raise RuntimeError(f"reactor {level} on fire")

    model = ScriptedModel(script)
    return Agent(name="operator", model=model, tools=[explode]), model


EXPLODE = [
    [function_call("explode", {"level": 7}, call_id="x1")],
    [assistant_message("it failed")],
]


# -- a tool that raises ---------------------------------------------------------------------------
def test_a_raising_tool_is_a_state_failure_and_the_sdk_answers_as_configured(
    episode: Episode, otel: Telemetry
) -> None:
    guard = otel.guard()
    agent, model = exploding_agent(EXPLODE)

    result, traj = episode(guard, guard_agent(agent, guard), "go", "raises", success=False)

    assert result is not None and result.final_output == "it failed"
    [verdict] = traj.verdicts
    assert (verdict.decision, verdict.cause, verdict.check) == (
        "allowed",
        "state_consistency",
        "state.exception",
    )
    assert (traj.length, traj.first_error_depth) == (1, 1)
    # The SDK's default failure message, which keeps the exception from the model, is kept.
    assert tool_outputs(model, 2)["x1"] == SDK_DEFAULT_ERROR
    [span] = otel.call_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["toolguard.check"] == "state.exception"


def test_a_custom_failure_function_still_answers_the_model(
    episode: Episode, otel: Telemetry
) -> None:
    guard = otel.guard()
    agent, model = exploding_agent(
        EXPLODE, failure_error_function=lambda ctx, exc: f"sorry: {type(exc).__name__}"
    )

    _, traj = episode(guard, guard_agent(agent, guard), "go", "custom")

    assert tool_outputs(model, 2)["x1"] == "sorry: RuntimeError"
    assert [v.check for v in traj.verdicts] == ["state.exception"]


def test_without_a_failure_function_the_run_fails_and_the_call_is_recorded(
    episode: Episode, otel: Telemetry
) -> None:
    guard = otel.guard()
    agent, _ = exploding_agent(EXPLODE[:1], failure_error_function=None)

    _, traj = episode(guard, guard_agent(agent, guard), "go", "fatal", raises=UserError)

    assert [v.check for v in traj.verdicts] == ["state.exception"]
    assert (traj.length, traj.first_error_depth, traj.ended) == (1, 1, True)
    assert otel.summary().status.status_code is StatusCode.ERROR


# -- log mode ------------------------------------------------------------------------------------
def test_log_mode_runs_the_invalid_call_and_records_every_failure(
    episode: Episode, otel: Telemetry
) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts, mode="log")
    script = [
        [function_call("remove_contact", {"contact_id": PHONE}, call_id="c1")],
        [function_call("search_contact", {"phone": PHONE}, call_id="c2")],
        [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c3")],
        [assistant_message("done")],
    ]
    agent, model = contacts_agent(guard, contacts, script)

    _, traj = episode(guard, agent, f"Remove {PHONE}", "log", success=True)

    first = min(traj.verdicts, key=lambda v: v.step or 0)
    assert (first.decision, first.cause) == ("logged", "dependency")
    assert first.failed_checks == (
        "dependency.contact_id",
        "precondition.contact_exists",
        "state.error_result",
    )
    # The call ran: the model read the tool's own answer, not the guard's message.
    assert "no contact" in tool_outputs(model, 2)["c1"]
    assert not tool_outputs(model, 2)["c1"].startswith("Error: the call")
    assert contacts == {}
    assert (traj.length, traj.first_error_depth) == (3, 1)
    assert otel.call_spans()[0].attributes["toolguard.decision"] == "logged"


# -- calls to tools the agent does not have -----------------------------------------------------
def test_the_sdks_unknown_tool_error_counts_as_a_step(episode: Episode, otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    script = [[function_call("delete_everything", {}, call_id="u1")]]
    agent, _ = contacts_agent(guard, contacts, script)

    # The SDK's default: the run stops with ModelBehaviorError.
    _, traj = episode(guard, agent, "wipe it", "unknown", raises=ModelBehaviorError)

    [verdict] = traj.verdicts
    assert (verdict.tool, verdict.call_id, verdict.step) == ("delete_everything", "u1", 1)
    assert (verdict.decision, verdict.cause, verdict.check) == ("blocked", "schema", "schema.tool")
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (1, 1, "schema")
    [span] = otel.call_spans()
    assert span.name == "execute_tool delete_everything"
    assert span.attributes["toolguard.step"] == 1
    assert otel.summary().attributes["toolguard.trajectory.length"] == 1


def test_unknown_tool_returned_to_the_model_keeps_its_place_in_the_turn(
    episode: Episode, otel: Telemetry
) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    script = [
        [
            function_call("find_contact", {"phone": PHONE}, call_id="u1"),
            function_call("search_contact", {"phone": PHONE}, call_id="c2"),
        ],
        [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c3")],
        [assistant_message("done")],
    ]
    agent, model = contacts_agent(guard, contacts, script)
    config = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model")

    _, traj = episode(guard, agent, f"Remove {PHONE}", "returned", run_config=config)

    assert tool_outputs(model, 2)["u1"] == "Tool 'find_contact' not found."
    assert {v.call_id: v.step for v in traj.verdicts} == {"u1": 1, "c2": 2, "c3": 3}
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (3, 1, "schema")
    assert contacts == {}


def test_handoffs_are_no_steps_and_the_next_agent_is_guarded(
    episode: Episode, otel: Telemetry
) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    model = ScriptedModel(
        [
            [function_call("transfer_to_contacts", {}, call_id="h1")],
            [function_call("search_contact", {"phone": PHONE}, call_id="c1")],
            [assistant_message("found")],
        ]
    )
    # Only the triage agent is guarded by hand: the agent it hands off to comes along.
    desk = Agent(name="contacts", model=model, tools=contact_tools(contacts))
    triage = Agent(name="triage", model=model, handoffs=[desk])
    triage = guard_agent(triage, guard, contracts=CONTRACTS)

    result, traj = episode(guard, triage, "find", "handoff")

    assert result is not None and result.last_agent.name == "contacts"
    assert [(v.call_id, v.step, v.valid) for v in traj.verdicts] == [("c1", 1, True)]
    assert traj.length == 1


# -- arguments ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "check"),
    [('{"contact_id": ', "schema.json"), ('{"contact": "id_8923"}', "schema.args")],
)
def test_bad_arguments_are_the_guards_schema_rejection(
    episode: Episode, otel: Telemetry, arguments: str, check: str
) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    script = [
        [function_call("remove_contact", arguments, call_id="c1")],
        [assistant_message("gave up")],
    ]
    agent, model = contacts_agent(guard, contacts, script)

    _, traj = episode(guard, agent, "remove", "args")

    assert [(v.cause, v.check) for v in traj.verdicts] == [("schema", check)]
    assert tool_outputs(model, 2)["c1"].startswith("Error: the call to `remove_contact`")
    assert contacts  # nothing removed


# -- the SDK's own stops around the tool --------------------------------------------------------
def test_a_timed_out_call_is_cancelled_not_failed(episode: Episode, otel: Telemetry) -> None:
    never = asyncio.Event()  # the tool waits on it forever; only the SDK's timeout ends it

    @function_tool(timeout=0.05)
    async def wait_forever(topic: str) -> str:
        """Wait for news."""
        await never.wait()
        return "news"

    guard = otel.guard()
    model = ScriptedModel(
        [
            [function_call("wait_forever", {"topic": "x"}, call_id="w1")],
            [assistant_message("nothing came")],
        ]
    )
    agent = guard_agent(Agent(name="a", model=model, tools=[wait_forever]), guard)

    _, traj = episode(guard, agent, "wait", "timeout")

    [verdict] = traj.verdicts
    assert (verdict.decision, verdict.valid) == ("cancelled", True)
    assert "timed out" in tool_outputs(model, 2)["w1"]
    assert (traj.length, traj.first_error_depth) == (1, 2)


def test_a_guardrail_rejection_ends_cancelled(episode: Episode, otel: Telemetry) -> None:
    @tool_input_guardrail
    def no_wires(data: Any) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.reject_content("wires are off today")

    @function_tool(tool_input_guardrails=[no_wires])
    def wire(amount: int) -> str:
        """Wire money."""
        return "sent"

    guard = otel.guard()
    model = ScriptedModel(
        [[function_call("wire", {"amount": 5}, call_id="g1")], [assistant_message("ok")]]
    )
    agent = guard_agent(Agent(name="a", model=model, tools=[wire]), guard)

    _, traj = episode(guard, agent, "wire 5", "guardrail")

    assert tool_outputs(model, 2)["g1"] == "wires are off today"
    # The SDK stopped it before the guard: it never ran, and its checks pass.
    [verdict] = traj.verdicts
    assert (verdict.step, verdict.decision, verdict.valid) == (1, "cancelled", True)
    assert traj.length == 1 and len(otel.call_spans()) == 1
