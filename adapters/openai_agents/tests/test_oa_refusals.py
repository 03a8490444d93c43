"""Calls the SDK refuses on its own, recorded with the cause the other adapters give them
(issue 23, defects 2 and 3): a call to a tool switched off with ``is_enabled`` is a
``schema.tool`` rejection like an unknown name, and arguments that fail the SDK's own
pydantic validation (a validator the JSON schema cannot express) are ``schema.args``, not
the environment's rejection."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from agents import Agent, ModelBehaviorError, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_support import Episode, Telemetry, tool_outputs
from pydantic import AfterValidator

from toolguard_openai_agents import guard_agent, run_sync

SDK_DEFAULT_ERROR = "An error occurred while running the tool. Please try again."


def _switchable(enabled: Any) -> tuple[Agent[Any], ScriptedModel, list[str]]:
    wiped: list[str] = []

    @function_tool(is_enabled=enabled)
    def wipe(target: str) -> str:
        """Wipe a disk."""
        wiped.append(target)
        return "wiped"

    @function_tool
    def status() -> str:
        """The system's status."""
        return "ok"

    model = ScriptedModel(
        [
            [
                function_call("status", {}, call_id="s1"),
                function_call("wipe", {"target": "sda"}, call_id="w1"),
            ],
            [assistant_message("could not")],
        ]
    )
    return Agent(name="ops", model=model, tools=[status, wipe]), model, wiped


def test_a_disabled_tool_is_a_schema_tool_rejection(episode: Episode, otel: Telemetry) -> None:
    guard = otel.guard()
    agent, model, wiped = _switchable(False)
    config = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model")

    _, traj = episode(guard, guard_agent(agent, guard), "wipe sda", "off", run_config=config)

    assert wiped == []
    assert tool_outputs(model, 2)["w1"] == "Tool 'wipe' not found."
    by_id = {v.call_id: v for v in traj.verdicts}
    assert set(by_id) == {"s1", "w1"}
    assert (by_id["w1"].step, by_id["w1"].decision, by_id["w1"].check) == (
        2,
        "blocked",
        "schema.tool",
    )
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (2, 2, "schema")
    attributes = otel.summary().attributes or {}
    assert attributes["toolguard.trajectory.first_error_depth"] == 2


def test_a_tool_disabled_by_a_callable_is_refused_too(episode: Episode, otel: Telemetry) -> None:
    guard = otel.guard()

    async def never(context: Any, agent: Any) -> bool:
        return False

    agent, _, wiped = _switchable(never)

    # The SDK's default for a tool it does not offer: the run stops.
    _, traj = episode(guard, guard_agent(agent, guard), "wipe", "off", raises=ModelBehaviorError)

    assert wiped == []
    assert [(v.call_id, v.check) for v in traj.verdicts if not v.valid] == [("w1", "schema.tool")]
    assert (traj.length, traj.first_error_depth) == (2, 2)


def _even(value: int) -> int:
    if value % 2:
        raise ValueError("must be even")
    return value


def test_the_sdks_own_argument_validation_is_a_schema_rejection(
    episode: Episode, otel: Telemetry
) -> None:
    ran: list[int] = []

    @function_tool
    def pair(count: Annotated[int, AfterValidator(_even)]) -> str:
        """Make pairs (an even count)."""
        ran.append(count)
        return "paired"

    model = ScriptedModel(
        [
            [function_call("pair", {"count": 3}, call_id="p1")],
            [function_call("pair", {"count": 4}, call_id="p2")],
            [assistant_message("paired")],
        ]
    )
    guard = otel.guard()
    agent = guard_agent(Agent(name="a", model=model, tools=[pair]), guard)

    _, traj = episode(guard, agent, "pair 3", "validator")

    assert ran == [4]
    first, second = sorted(traj.verdicts, key=lambda v: v.step)
    assert (first.decision, first.cause, first.check) == ("blocked", "schema", "schema.args")
    assert second.valid
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (2, 1, "schema")
    # The SDK still answers the model as it does without the guard (its default handler
    # hides the error).
    assert tool_outputs(model, 2)["p1"] == SDK_DEFAULT_ERROR
    span = next(s for s in otel.call_spans() if s.attributes["gen_ai.tool.call.id"] == "p1")
    assert span.attributes["error.type"] == "toolguard.schema"
    assert "3" not in str(span.attributes["toolguard.message"])  # no argument value


def test_a_run_that_raises_ends_its_trajectory_with_labels_and_no_outcome(
    otel: Telemetry,
) -> None:
    """Issue 23, defect 5, for this adapter: ``run_sync`` ends the run's trajectory when the
    run raises (a ``with`` block), so the failing run stays in its cohort."""
    guard = otel.guard()
    agent, _, _ = _switchable(False)  # the SDK's default for the disabled tool: the run stops
    with pytest.raises(ModelBehaviorError):
        run_sync(
            guard,
            guard_agent(agent, guard),
            "wipe",
            labels={"model": "m"},
            success=lambda result: True,
            run_config=RunConfig(tracing_disabled=True),
        )
    summary = otel.summary()
    attributes = summary.attributes or {}
    assert attributes["toolguard.label.model"] == "m"
    assert "toolguard.trajectory.success" not in attributes
    assert attributes["toolguard.trajectory.length"] == 2
    assert not summary.status.is_ok
    assert len(guard.trajectories) == 0
