"""The paper's address book (arXiv:2610.40444, section 3.4) as OpenAI Agents SDK tools."""

from __future__ import annotations

from typing import Any

from agents import Agent, FunctionTool, function_tool
from agents.testing import ScriptedModel

import toolguard as tg
from toolguard_openai_agents import guard_agent

PHONE = "+1-555-0199"
CONTACT_ID = "id_8923"

CONTRACTS: dict[str, Any] = {
    "search_contact": {"produces": {"id": "contact_id"}},
    "remove_contact": {
        "refs": {"contact_id": "contact_id"},
        "invalidates": {"contact_id": "contact_id"},
        "preconditions": [
            tg.Precondition(
                "contact_exists",
                lambda state, contact_id: contact_id in state,
                "the contact must exist",
            )
        ],
    },
}


def address_book() -> dict[str, dict[str, str]]:
    return {CONTACT_ID: {"id": CONTACT_ID, "name": "Alex", "phone": PHONE}}


def contact_tools(contacts: dict[str, dict[str, str]]) -> list[FunctionTool]:
    # One sync and one async tool: the SDK runs the first in a worker thread.
    @function_tool
    def search_contact(phone: str) -> list[dict[str, str]]:
        """Find contacts by phone number."""
        return [c for c in contacts.values() if c["phone"] == phone]

    @function_tool
    async def remove_contact(contact_id: str) -> dict[str, Any]:
        """Remove a contact by its id."""
        if contact_id not in contacts:
            return {"error": f"no contact {contact_id}"}
        del contacts[contact_id]
        return {"removed": contact_id}

    return [search_contact, remove_contact]


def contacts_agent(
    guard: tg.Guard, contacts: dict[str, dict[str, str]], script: list[Any], **options: Any
) -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel(script)
    agent = Agent(name="assistant", model=model, tools=contact_tools(contacts), **options)
    return guard_agent(agent, guard, contracts=CONTRACTS), model


def approval_agent(
    guard: tg.Guard,
    contacts: dict[str, dict[str, str]],
    contact_id: str = CONTACT_ID,
    final: str = "Done.",
) -> Agent[Any]:
    """A search, then remove_contact(contact_id), which needs a human's approval (the run
    pauses there), then ``final``: guarded with the contracts."""
    from agents.testing import assistant_message, function_call

    search, remove = contact_tools(contacts)
    remove.needs_approval = True
    model = ScriptedModel(
        [
            [function_call("search_contact", {"phone": PHONE}, call_id="c1")],
            [function_call("remove_contact", {"contact_id": contact_id}, call_id="c2")],
            [assistant_message(final)],
        ]
    )
    return guard_agent(
        Agent(name="a", model=model, tools=[search, remove]), guard, contracts=CONTRACTS
    )
