"""Multi-turn chat (issue 23): each ``agent.run`` is its own trajectory, and an id the agent
saw in an earlier turn (a tool return in ``message_history``) is bound before the run's first
call, so the legal follow-up is not blocked. Also with the history stored as JSON and loaded
back, and an id the history never showed is still blocked."""

from __future__ import annotations

from typing import Any

import pytest
import toolguard as tg
from conftest import Telemetry, scripted
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, Tool
from pydantic_ai.messages import ModelMessagesTypeAdapter, TextPart, ToolCallPart

from toolguard_pydantic_ai import ToolGuard

PHONE = "+1-555-0199"
CONTRACTS = {
    "search_contacts": {"produces": {"id": "contact_id"}},
    "remove_contact": {"refs": {"contact_id": "contact_id"}},
}


def chat(otel: Telemetry, remove_id: str) -> tuple[Agent[None, str], list[str], tg.Guard]:
    removed: list[str] = []

    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [{"id": "id_8923", "name": "Alice", "phone": phone}]

    def remove_contact(contact_id: str) -> str:
        """Remove a contact by its id."""
        removed.append(contact_id)
        return "removed"

    model = scripted(
        [ToolCallPart("search_contacts", {"phone": PHONE}, tool_call_id="c1")],
        [TextPart("Found Alice. Remove her?")],
        [ToolCallPart("remove_contact", {"contact_id": remove_id}, tool_call_id="c2")],
        [TextPart("Done.")],
    )
    guard = otel.guard()
    agent = Agent(
        model,
        tools=[search_contacts, remove_contact],
        capabilities=[ToolGuard(guard, contracts=CONTRACTS)],
    )
    return agent, removed, guard


@pytest.mark.parametrize("stored", [False, True], ids=["objects", "json"])
def test_two_turns_with_message_history(otel: Telemetry, stored: bool) -> None:
    agent, removed, _ = chat(otel, "id_8923")
    first = agent.run_sync(f"Find {PHONE}")
    history: Any = first.all_messages()
    if stored:
        # As an app keeps a conversation between requests: stored as JSON, loaded back by a
        # new process (a new agent and guard, which have seen no call yet).
        history = ModelMessagesTypeAdapter.validate_json(first.all_messages_json())
        agent, removed, _ = chat(otel, "id_8923")
    agent.run_sync("Yes, remove her.", message_history=history)

    assert removed == ["id_8923"]
    summaries = [dict(s.attributes or {}) for s in otel.spans() if s.name == "toolguard.trajectory"]
    assert len(summaries) == 2
    second = summaries[1]
    assert second["toolguard.trajectory.length"] == 1
    assert second["toolguard.trajectory.first_error_depth"] == 2
    assert "toolguard.trajectory.first_error.cause" not in second


def test_an_id_the_history_never_showed_is_still_blocked(otel: Telemetry) -> None:
    agent, removed, _ = chat(otel, "id_0001")
    first = agent.run_sync(f"Find {PHONE}")
    agent.run_sync("Yes, remove her.", message_history=first.all_messages())

    assert removed == []
    second = [s for s in otel.spans() if s.name == "toolguard.trajectory"][1]
    assert (second.attributes or {})["toolguard.trajectory.first_error.cause"] == "dependency"


# -- the app's own trajectory around each run (README: `with guard.trajectory(...)`) ---------
@pytest.mark.parametrize("stored", [False, True], ids=["objects", "json"])
def test_a_user_trajectory_per_run_binds_the_history(otel: Telemetry, stored: bool) -> None:
    agent, removed, guard = chat(otel, "id_8923")
    with guard.trajectory("turn-1"):
        first = agent.run_sync(f"Find {PHONE}")
    history: Any = first.all_messages()
    if stored:
        history = ModelMessagesTypeAdapter.validate_json(first.all_messages_json())
    with guard.trajectory("turn-2") as second:
        agent.run_sync("Yes, remove her.", message_history=history)

    assert removed == ["id_8923"]
    assert (second.length, second.first_error_depth) == (1, 2)


def test_an_approval_resumed_in_a_user_trajectory_of_its_own(otel: Telemetry) -> None:
    contacts = {"id_1": {"id": "id_1", "phone": PHONE}}

    def search(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [c for c in contacts.values() if c["phone"] == phone]

    def remove(contact_id: str) -> str:
        """Remove a contact by its id."""
        del contacts[contact_id]
        return "removed"

    model = scripted(
        [ToolCallPart("search", {"phone": PHONE}, tool_call_id="c1")],
        [ToolCallPart("remove", {"contact_id": "id_1"}, tool_call_id="c2")],
    )
    guard = otel.guard()
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        model,
        output_type=[str, DeferredToolRequests],
        tools=[search, Tool(remove, requires_approval=True)],
        capabilities=[
            ToolGuard(
                guard,
                contracts={
                    "search": {"produces": {"id": "contact_id"}},
                    "remove": {"refs": {"contact_id": "contact_id"}},
                },
            )
        ],
    )
    with guard.trajectory("asked"):
        first = agent.run_sync(f"Remove {PHONE}")
    assert isinstance(first.output, DeferredToolRequests)
    with guard.trajectory("approved") as approved:
        agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"c2": True}),
        )

    assert contacts == {}
    assert approved.first_error_depth == 2  # none


def test_a_trajectory_spanning_the_chat_keeps_an_id_removed_in_an_earlier_turn_stale(
    otel: Telemetry,
) -> None:
    # Turn 2 removes the id (invalidates); turn 3 replays the history, whose search result
    # still shows it: in the one trajectory of the chat it stays stale, so removing it again
    # is a dependency failure and never runs.
    removed: list[str] = []

    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [{"id": "id_8923"}]

    def remove_contact(contact_id: str) -> str:
        """Remove a contact by its id."""
        removed.append(contact_id)
        return "removed"

    model = scripted(
        [ToolCallPart("search_contacts", {"phone": PHONE}, tool_call_id="c1")],
        [TextPart("Found Alice.")],
        [ToolCallPart("remove_contact", {"contact_id": "id_8923"}, tool_call_id="c2")],
        [TextPart("Removed.")],
        [ToolCallPart("remove_contact", {"contact_id": "id_8923"}, tool_call_id="c3")],
    )
    guard = otel.guard()
    contracts: dict[str, tg.ToolOptions] = {
        "search_contacts": {"produces": {"id": "contact_id"}},
        "remove_contact": {
            "refs": {"contact_id": "contact_id"},
            "invalidates": {"contact_id": "contact_id"},
        },
    }
    agent = Agent(
        model,
        tools=[search_contacts, remove_contact],
        capabilities=[ToolGuard(guard, contracts=contracts)],
    )
    with guard.trajectory("chat") as chat_traj:
        first = agent.run_sync(f"Find {PHONE}")
        second = agent.run_sync("Remove her.", message_history=first.all_messages())
        agent.run_sync("Remove her again.", message_history=second.all_messages())

    assert removed == ["id_8923"]
    assert [v.cause for v in chat_traj.verdicts] == [None, None, "dependency"]


# -- what the user said in earlier turns (grounded) --------------------------------------------
@pytest.mark.parametrize("stored", [False, True], ids=["objects", "json"])
@pytest.mark.parametrize(
    ("address", "observe", "sent"),
    [
        ("al@example.org", True, True),  # the user gave it in turn 1
        ("bo@example.org", True, False),  # nobody did: still a guess
        ("al@example.org", False, False),  # observe_prompt=False: no prompt is seen
    ],
)
def test_a_value_the_user_gave_in_an_earlier_turn_is_grounded(
    otel: Telemetry, stored: bool, address: str, observe: bool, sent: bool
) -> None:
    outbox: list[str] = []

    def send_email(to: str, body: str) -> str:
        """Send an email."""
        outbox.append(to)
        return "sent"

    model = scripted(
        [TextPart("Noted.")],
        [ToolCallPart("send_email", {"to": address, "body": "hello"}, tool_call_id="c1")],
    )
    capability = ToolGuard(
        otel.guard(), contracts={"send_email": {"grounded": ["to"]}}, observe_prompt=observe
    )
    agent = Agent(model, tools=[send_email], capabilities=[capability])
    first = agent.run_sync("My address is al@example.org")
    history: Any = first.all_messages()
    if stored:
        history = ModelMessagesTypeAdapter.validate_json(first.all_messages_json())
    agent.run_sync("Now send me a hello email", message_history=history)

    assert outbox == ([address] if sent else [])
