"""Toolsets that rename their tools (``prefixed``, ``renamed``): the model sees, and calls,
the new name, so that is the name a contract takes and the name its check knows."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import toolguard as tg
from conftest import Telemetry, scripted
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from toolguard_pydantic_ai import ToolGuard

PHONE = "+1-555-0199"
REFS: tg.ToolOptions = {"refs": {"contact_id": "contact_id"}}


def crm_agent(
    guard: tg.Guard, toolset: AbstractToolset[None], name: str, contracts: dict[str, tg.ToolOptions]
) -> Agent[None, str]:
    model = scripted(
        [ToolCallPart("echo", {"text": "first"}, tool_call_id="c1")],
        [ToolCallPart(name, {"contact_id": PHONE}, tool_call_id="c2")],  # a phone, not an id
    )

    def echo(text: str) -> str:
        return text

    return Agent(
        model,
        tools=[echo],
        toolsets=[toolset],
        capabilities=[ToolGuard(guard, contracts=contracts)],
    )


def removals(log: list[str]) -> FunctionToolset[None]:
    async def after_the_first_step(
        ctx: RunContext[None], tool_def: ToolDefinition
    ) -> ToolDefinition | None:
        return tool_def if ctx.run_step > 1 else None  # not offered at the first step

    def remove(contact_id: str) -> str:
        """Remove a contact by its id."""
        log.append(contact_id)
        return "removed"

    return FunctionToolset([Tool(remove, prepare=after_the_first_step)])


Rename = Callable[[FunctionToolset[None]], AbstractToolset[None]]


@pytest.mark.parametrize(
    ("rename", "name"),
    [
        (lambda ts: ts.prefixed("crm"), "crm_remove"),
        (lambda ts: ts.renamed({"delete_contact": "remove"}), "delete_contact"),
    ],
)
def test_a_contract_under_the_name_the_model_sees_applies(
    otel: Telemetry, rename: Rename, name: str
) -> None:
    log: list[str] = []
    guard = otel.guard()
    toolset = rename(removals(log))
    agent = crm_agent(guard, toolset, name, {name: REFS})
    with guard.trajectory("t") as traj:
        agent.run_sync("Remove the contact")
    assert log == []  # the phone number where an id belongs was blocked
    assert [(v.tool, v.cause) for v in traj.verdicts] == [("echo", None), (name, "dependency")]


def test_a_contract_under_the_toolsets_own_name_for_a_renamed_tool_fails(otel: Telemetry) -> None:
    # The model calls crm_remove: a contract for remove would never apply.
    log: list[str] = []
    agent = crm_agent(otel.guard(), removals(log).prefixed("crm"), "crm_remove", {"remove": REFS})
    with pytest.raises(ValueError, match="not tools of this agent: remove ") as raised:
        agent.run_sync("Remove the contact")
    assert "crm_remove" in str(raised.value)
    assert log == []


def test_a_contract_for_a_run_toolsets_tool_hidden_at_the_first_step_applies(
    otel: Telemetry,
) -> None:
    # The tool is not offered at the first step and not the agent's own: the run's.
    log: list[str] = []
    guard = otel.guard()
    model = scripted(
        [ToolCallPart("echo", {"text": "first"}, tool_call_id="c1")],
        [ToolCallPart("remove", {"contact_id": PHONE}, tool_call_id="c2")],
    )

    def echo(text: str) -> str:
        return text

    capability = ToolGuard(guard, contracts={"remove": REFS})
    agent = Agent(model, tools=[echo], capabilities=[capability])
    with guard.trajectory("t") as traj:
        agent.run_sync("Remove the contact", toolsets=[removals(log)])
    assert log == []
    assert [(v.tool, v.cause) for v in traj.verdicts] == [("echo", None), ("remove", "dependency")]
