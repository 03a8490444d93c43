"""Tools with a declared output schema (``@function_tool(output_type=...)``, or a hand-made
``FunctionTool`` with ``output_json_schema``): the SDK validates a tool's result against it,
which the guard's message does not match. A blocked call's message reaches the model the way
the SDK's own tool errors do, unvalidated, instead of failing the run with a ``UserError``."""

from __future__ import annotations

import json
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    ToolGuardrailFunctionOutput,
    ToolOutputGuardrailData,
    function_tool,
    tool_output_guardrail,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_contacts import CONTACT_ID, PHONE, address_book
from oa_support import Episode, Telemetry, tool_outputs
from pydantic import BaseModel

from toolguard_openai_agents import guard_agent

REFS = {"remove_contact": {"refs": {"contact_id": "contact_id"}}}
SCRIPT = [
    [function_call("remove_contact", {"contact_id": PHONE}, call_id="c1")],  # a phone: blocked
    [assistant_message("Could not.")],
]


class Removed(BaseModel):
    removed: str


def _typed_tool(contacts: dict[str, Any], seen: list[Any]) -> FunctionTool:
    @tool_output_guardrail
    def watch(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        seen.append(data.output)
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(output_type=Removed, tool_output_guardrails=[watch])
    def remove_contact(contact_id: str) -> Removed:
        """Remove a contact by its id."""
        del contacts[contact_id]
        return Removed(removed=contact_id)

    return remove_contact


def _hand_made_tool(contacts: dict[str, Any]) -> FunctionTool:
    async def invoke(ctx: Any, arguments: str) -> dict[str, str]:
        contact_id = json.loads(arguments)["contact_id"]
        del contacts[contact_id]
        return {"removed": contact_id}

    return FunctionTool(
        name="remove_contact",
        description="Remove a contact by its id.",
        params_json_schema={
            "type": "object",
            "properties": {"contact_id": {"type": "string"}},
            "required": ["contact_id"],
            "additionalProperties": False,
        },
        on_invoke_tool=invoke,
        output_json_schema={
            "type": "object",
            "properties": {"removed": {"type": "string"}},
            "required": ["removed"],
            "additionalProperties": False,
        },
    )


def test_a_blocked_call_to_a_typed_tool_answers_the_model(
    episode: Episode, otel: Telemetry
) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    seen: list[Any] = []
    model = ScriptedModel(SCRIPT)
    agent = Agent(name="a", model=model, tools=[_typed_tool(contacts, seen)])

    result, traj = episode(guard, guard_agent(agent, guard, contracts=REFS), "remove")

    assert result is not None and result.final_output == "Could not."
    assert contacts  # the tool never ran
    assert tool_outputs(model, 2)["c1"].startswith("Error: the call to `remove_contact`")
    assert [(v.call_id, v.cause) for v in traj.verdicts] == [("c1", "dependency")]
    assert seen == []  # the user's guardrail judges tool outputs, and there was none


def test_a_blocked_call_to_a_hand_made_typed_tool_answers_the_model(
    episode: Episode, otel: Telemetry
) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    model = ScriptedModel(SCRIPT)
    agent = Agent(name="a", model=model, tools=[_hand_made_tool(contacts)])

    result, traj = episode(guard, guard_agent(agent, guard, contracts=REFS), "remove")

    assert result is not None and result.final_output == "Could not."
    assert contacts
    assert tool_outputs(model, 2)["c1"].startswith("Error: the call to `remove_contact`")
    assert [(v.call_id, v.cause) for v in traj.verdicts] == [("c1", "dependency")]


def test_a_legal_call_to_a_typed_tool_is_validated_as_without_the_guard(
    episode: Episode, otel: Telemetry
) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    seen: list[Any] = []
    model = ScriptedModel(
        [
            [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c1")],
            [assistant_message("Removed.")],
        ]
    )
    agent = Agent(name="a", model=model, tools=[_typed_tool(contacts, seen)])

    _, traj = episode(guard, guard_agent(agent, guard), "remove")

    assert contacts == {}
    assert json.loads(tool_outputs(model, 2)["c1"]) == {"removed": CONTACT_ID}
    assert seen == [Removed(removed=CONTACT_ID)]  # the user's guardrail still sees the result
    assert [(v.call_id, v.valid) for v in traj.verdicts] == [("c1", True)]
