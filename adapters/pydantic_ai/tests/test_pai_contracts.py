"""Contracts checked before any tool runs: their shape when the capability is built, their
tool names and argument names at a run's first model request, where the agent's tools are
known. A misspelt tool name would otherwise leave the tool it was meant for unguarded."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import toolguard as tg
from conftest import Telemetry, scripted
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from toolguard_pydantic_ai import ToolGuard

PHONE = "+1-555-0199"


def contacts_agent(
    guard: tg.Guard, contracts: Any, *, hide_remove: bool = False
) -> tuple[Agent[None, str], list[str]]:
    log: list[str] = []
    model = scripted(
        [ToolCallPart("search_contacts", {"phone": PHONE}, tool_call_id="c1")],
        [ToolCallPart("remove_contact", {"contact_id": PHONE}, tool_call_id="c2")],  # a phone
    )
    agent = Agent(model, capabilities=[ToolGuard(guard, contracts=contracts)])

    @agent.tool_plain  # registered after the Agent was built, as apps do
    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        log.append("search")
        return [{"id": "id_8923"}]

    async def after_a_search(
        ctx: RunContext[None], tool_def: ToolDefinition
    ) -> ToolDefinition | None:
        return tool_def if ctx.run_step > 1 or not hide_remove else None

    @agent.tool_plain(prepare=after_a_search)
    def remove_contact(contact_id: str) -> str:
        """Remove a contact by its id."""
        log.append(f"remove {contact_id}")
        return "removed"

    return agent, log


def test_a_contract_for_no_tool_of_the_agent_fails_before_any_call(otel: Telemetry) -> None:
    contracts = {
        "search_contacts": {"produces": {"id": "contact_id"}},
        "remove_contacts": {"refs": {"contact_id": "contact_id"}},
    }
    agent, log = contacts_agent(otel.guard(), contracts)
    with pytest.raises(ValueError, match="remove_contacts") as raised:
        agent.run_sync(f"Remove {PHONE}")

    assert "(its tools: remove_contact, search_contacts)" in str(raised.value)
    assert log == []


def test_a_tool_hidden_at_the_first_step_is_still_a_tool_of_the_agent(otel: Telemetry) -> None:
    contracts = {
        "search_contacts": {"produces": {"id": "contact_id"}},
        "remove_contact": {"refs": {"contact_id": "contact_id"}},
    }
    guard = otel.guard()
    agent, log = contacts_agent(guard, contracts, hide_remove=True)
    with guard.trajectory("t") as traj:
        agent.run_sync(f"Remove {PHONE}")

    assert log == ["search"]  # the phone number where an id belongs was blocked
    assert [v.cause for v in traj.verdicts] == [None, "dependency"]


def test_a_contract_for_a_tool_given_to_the_run_is_known(otel: Telemetry) -> None:
    sent: list[str] = []

    def notify(to: str) -> str:
        """Notify someone."""
        sent.append(to)
        return "sent"

    model = scripted([ToolCallPart("notify", {"to": "eve@x.org"}, tool_call_id="c1")])
    capability = ToolGuard(otel.guard(), contracts={"notify": {"grounded": ["to"]}})
    agent = Agent(model, capabilities=[capability])
    agent.run_sync("Tell someone", toolsets=[FunctionToolset([notify])])

    assert sent == []  # the contract applied: an address nobody gave


def test_a_contract_naming_no_argument_fails_before_any_call(otel: Telemetry) -> None:
    agent, log = contacts_agent(otel.guard(), {"remove_contact": {"refs": {"contactid": "k"}}})
    with pytest.raises(tg.ToolDefinitionError, match="'remove_contact': refs names 'contactid'"):
        agent.run_sync(f"Remove {PHONE}")
    assert log == []  # search_contacts, called first, never ran


@pytest.mark.parametrize(
    ("contract", "message"),
    [
        (["refs"], r"contracts\['remove_contact'\] must be a mapping of guard.declare options"),
        ({"refz": {}}, r"contracts\['remove_contact'\]: unknown option\(s\) refz; known: "),
        ({"refs": ["contact_id"]}, r"\['remove_contact'\]: refs must be a mapping"),
        ({"grounded": "contact_id"}, r"\['remove_contact'\]: grounded must be a list"),
        ({"mode": "blok"}, r"\['remove_contact'\]: .*mode must be 'block' or 'log'"),
        ({"preconditions": [len]}, r"\['remove_contact'\]: .*must be tg.Precondition"),
    ],
    ids=["not-a-mapping", "unknown-option", "refs-list", "grounded-str", "mode", "condition"],
)
def test_a_malformed_contract_fails_when_the_capability_is_built(
    contract: Any, message: str
) -> None:
    with pytest.raises(tg.ToolDefinitionError, match=message):
        ToolGuard(tg.Guard(), contracts={"remove_contact": contract})


def test_contracts_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match=r"mapping of tool name -> guard\.declare options"):
        ToolGuard(tg.Guard(), contracts=[("remove_contact", {})])  # type: ignore[arg-type]


# -- one guard, two agents, one tool name ------------------------------------------------------
def search_agent(guard: tg.Guard, parameter: str) -> Agent[None, str]:
    def search(**kwargs: str) -> str:
        return "hit"

    tool = Tool.from_schema(
        search,
        name="search",
        description="Search.",
        json_schema={"type": "object", "properties": {parameter: {"type": "string"}}},
    )
    model = scripted([ToolCallPart("search", {parameter: "x"}, tool_call_id="c1")])
    return Agent(model, tools=[tool], capabilities=[ToolGuard(guard)])


def test_a_second_agent_with_another_tool_of_that_name_is_warned(otel: Telemetry) -> None:
    guard = otel.guard()
    search_agent(guard, "query").run_sync("go")
    with pytest.warns(UserWarning, match=r"tool 'search' with arguments \(query\).*\(phone\)"):
        search_agent(guard, "phone").run_sync("go")


def test_agents_sharing_a_guard_and_the_same_tool_are_not_warned(otel: Telemetry) -> None:
    guard = otel.guard()
    search_agent(guard, "query").run_sync("go")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search_agent(guard, "query").run_sync("go")
