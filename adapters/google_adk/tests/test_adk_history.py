"""What a run knows before its first call: the session's earlier results (a trajectory kept
for the whole chat, a result of ADK's own shape or the tool's), a long-running tool's final
result sent as the next message, a session resumed by a sub-agent after a restart, and a
sub-agent called as a tool."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import toolguard as tg
from conftest import Telemetry, answers, chat, message, scripted
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import LongRunningFunctionTool
from google.adk.tools.agent_tool import AgentTool
from google.genai import types

from toolguard_google_adk import ToolGuardPlugin

CONTRACTS: dict[str, tg.ToolOptions] = {
    "search_contacts": {"produces": {"id": "contact_id"}},
    "remove_contact": {
        "refs": {"contact_id": "contact_id"},
        "invalidates": {"contact_id": "contact_id"},
    },
}


def search_contacts(phone: str) -> list[dict[str, str]]:
    """Contacts with this phone number."""
    return [{"id": "id_1", "phone": phone}, {"id": "id_2", "phone": phone}]


def remove_contact(contact_id: str) -> dict[str, str]:
    """Remove a contact by id."""
    return {"removed": contact_id}


def errors(events: list[Event]) -> list[str]:
    return [
        str(r.response["error"]) for r in answers(events) if r.response and "error" in r.response
    ]


def test_one_trajectory_for_the_chat_keeps_an_id_removed_in_an_earlier_turn_stale(
    otel: Telemetry,
) -> None:
    # Each turn binds the session's earlier results again; the id turn 1 removed must not
    # come back live from turn 1's search result.
    guard = otel.guard()
    traj = guard.trajectory("whole-chat").start()
    model = scripted(
        [("search_contacts", {"phone": "+1"})],
        [("remove_contact", {"contact_id": "id_1"})],
        "removed",
        [("remove_contact", {"contact_id": "id_1"}), ("remove_contact", {"contact_id": "id_2"})],
    )
    agent = LlmAgent(name="a", model=model, tools=[search_contacts, remove_contact])
    session = chat(agent, [ToolGuardPlugin(guard, trajectory=traj, contracts=CONTRACTS)])
    session.send("remove the first contact of +1")
    events = session.send("remove it again, and the other one")
    traj.end()
    again, other = answers(events)[:2]
    assert again.response is not None and "invalidated" in again.response["error"]
    assert other.response == {"removed": "id_2"}  # what the search found and was not removed


def ask_approval(amount: int) -> dict[str, str]:
    """Ask a manager to approve; the ticket comes back later."""
    return {"status": "pending"}


def reimburse(ticket_id: str) -> dict[str, str]:
    """Pay out an approved ticket."""
    return {"paid": ticket_id}


@pytest.mark.parametrize("history", [True, False])
def test_a_long_running_tools_final_result_sent_as_the_next_message_is_bound(
    otel: Telemetry, history: bool
) -> None:
    # ADK's documented pattern: the tool answers "pending", the client later sends the final
    # FunctionResponse as the new message, and the model uses what it holds.
    def then_reimburse(results: list[types.FunctionResponse]) -> list[tuple[str, Any]] | str:
        answer = results[0].response if results else None
        if answer is None or answer.get("status") != "approved":
            return "waiting for the approval"
        return [("reimburse", {"ticket_id": answer["ticket_id"]})]

    # ADK sends the model the call and its final answer only: the same turn of the script.
    model = scripted([("ask_approval", {"amount": 50})], then_reimburse)
    plugin = ToolGuardPlugin(
        otel.guard(),
        history=history,
        contracts={
            "ask_approval": {"produces": {"ticket_id": "ticket"}},
            "reimburse": {"refs": {"ticket_id": "ticket"}},
        },
    )
    tools = [LongRunningFunctionTool(ask_approval), reimburse]
    session = chat(LlmAgent(name="a", model=model, tools=tools), [plugin])
    first = session.send("reimburse 50")
    (call,) = [c for e in first for c in e.get_function_calls() if c.name == "ask_approval"]
    final = types.FunctionResponse(
        id=call.id, name="ask_approval", response={"status": "approved", "ticket_id": "t-9"}
    )
    events = asyncio.run(
        session.asend_content(
            types.Content(role="user", parts=[types.Part(function_response=final)])
        )
    )
    assert [r.response for r in answers(events) if r.name == "reimburse"] == [{"paid": "t-9"}]
    # The resumed run is a trajectory of its own: the report reads two, not one of two halves.
    ids = [(s.attributes or {})["toolguard.trajectory.id"] for s in otel.summaries()]
    invocation = first[0].invocation_id
    assert ids == [invocation, f"{invocation}#2"]


def test_a_result_of_one_key_result_is_read_as_the_tool_returned_it_in_the_next_turn(
    otel: Telemetry,
) -> None:
    # ADK records a list as {"result": [...]} and a dict as it is: a tool returning its own
    # {"result": [...]} dict (annotated so) keeps its path in the next invocation.
    def search(q: str) -> dict[str, Any]:
        """Search orders."""
        return {"result": [{"order_id": "o-1"}]}

    def listing(q: str) -> list[dict[str, str]]:
        """List orders."""
        return [{"order_id": "o-2"}]

    def cancel(order_id: str) -> dict[str, str]:
        """Cancel an order."""
        return {"cancelled": order_id}

    contracts: dict[str, tg.ToolOptions] = {
        "search": {"produces": {"result[].order_id": "order"}},
        "listing": {"produces": {"[].order_id": "order"}},
        "cancel": {"refs": {"order_id": "order"}},
    }
    model = scripted(
        [("search", {"q": "x"}), ("listing", {"q": "x"})],
        "found o-1 and o-2",
        [("cancel", {"order_id": "o-1"}), ("cancel", {"order_id": "o-2"})],
    )
    agent = LlmAgent(name="a", model=model, tools=[search, listing, cancel])
    session = chat(agent, [ToolGuardPlugin(otel.guard(), contracts=contracts)])
    session.send("find")
    events = session.send("now cancel them")
    assert [r.response for r in answers(events)] == [{"cancelled": "o-1"}, {"cancelled": "o-2"}]


@pytest.mark.parametrize(
    ("response", "returns_dict", "expected"),
    [
        ({"result": [1]}, None, [1]),  # ADK's wrapping of a list
        ({"result": "text"}, False, "text"),
        ({"result": {"id": 1}}, None, {"result": {"id": 1}}),  # ADK never wraps a dict
        ({"result": {"id": 1}}, False, {"id": 1}),  # a model ADK wrapped, stored as JSON
        ({"result": [1]}, True, {"result": [1]}),  # the tool's own dict
        ({"result": [1], "more": 2}, None, {"result": [1], "more": 2}),
    ],
)
def test_unwrap_undoes_only_adks_wrapping(
    response: dict[str, Any], returns_dict: bool | None, expected: Any
) -> None:
    from toolguard_google_adk._episode import unwrap

    assert unwrap(response, returns_dict) == expected


def test_returns_dict_reads_the_functions_annotation() -> None:
    from google.adk.tools.function_tool import FunctionTool

    from toolguard_google_adk._calls import returns_dict

    def mapping() -> dict[str, int]:
        return {}

    def maybe() -> dict[str, int] | None:
        return None

    def listing() -> list[int]:
        return []

    def bare():  # type: ignore[no-untyped-def]
        return []

    found = [returns_dict(FunctionTool(f)) for f in (mapping, maybe, listing, bare)]
    assert found == [True, None, False, None]


def test_after_a_restart_a_session_resumed_by_a_sub_agent_binds_the_roots_results(
    otel: Telemetry,
) -> None:
    # A new Runner, Guard and plugin over the same sessions (a server restart): the session's
    # last agent was reached by transfer, so it runs first; its tools differ from the root's.
    sessions = InMemorySessionService()

    def make_runner() -> Runner:
        remover = LlmAgent(
            name="remover",
            description="removes contacts",
            model=scripted(
                [("remove_contact", {"contact_id": "id_1"})],
                "removed 1",
                [("remove_contact", {"contact_id": "id_2"})],
            ),
            tools=[remove_contact],
        )
        root = LlmAgent(
            name="root",
            model=scripted(
                [("search_contacts", {"phone": "+1"})],
                [("transfer_to_agent", {"agent_name": "remover"})],
            ),
            tools=[search_contacts],
            sub_agents=[remover],
        )
        plugin = ToolGuardPlugin(otel.guard(), contracts=CONTRACTS)
        return Runner(
            app=App(name="app", root_agent=root, plugins=[plugin]), session_service=sessions
        )

    async def send(runner: Runner, session_id: str, text: str) -> list[Event]:
        return [
            e
            async for e in runner.run_async(
                user_id="user", session_id=session_id, new_message=message(text)
            )
        ]

    async def two_turns() -> list[Event]:
        session = await sessions.create_session(app_name="app", user_id="user")
        assert errors(await send(make_runner(), session.id, "remove +1")) == []
        return await send(make_runner(), session.id, "and the other")

    events = asyncio.run(two_turns())
    assert [r.response for r in answers(events)] == [{"removed": "id_2"}]


def test_a_contract_naming_no_tool_of_the_tree_fails_the_first_run(otel: Telemetry) -> None:
    plugin = ToolGuardPlugin(
        otel.guard(), contracts={"remove_contcat": {"refs": {"contact_id": "contact_id"}}}
    )
    removed: list[str] = []

    def remove(contact_id: str) -> dict[str, str]:
        """Remove a contact by id."""
        removed.append(contact_id)
        return {"removed": contact_id}

    model = scripted([("remove", {"contact_id": "+1-555"})])
    session = chat(LlmAgent(name="a", model=model, tools=[remove]), [plugin])
    with pytest.raises(Exception) as raised:
        session.send("go")
    chain = [raised.value, raised.value.__cause__]
    assert any(
        isinstance(e, ValueError) and "remove_contcat" in str(e) and "(tools: remove)" in str(e)
        for e in chain
    ), chain
    assert removed == []  # nothing ran unguarded


def test_contracts_may_name_tools_of_sub_agents_agent_tools_and_adks_own(
    otel: Telemetry,
) -> None:
    inner = LlmAgent(name="inner", model=scripted(), tools=[remove_contact])
    helper = LlmAgent(name="helper", model=scripted(), tools=[reimburse])
    root = LlmAgent(
        name="root",
        model=scripted(),
        tools=[search_contacts, AgentTool(agent=inner)],
        sub_agents=[helper],
    )
    contracts: dict[str, tg.ToolOptions] = {
        **CONTRACTS,
        "reimburse": {},
        "inner": {},
        "transfer_to_agent": {},
    }
    events = chat(root, [ToolGuardPlugin(otel.guard(), contracts=contracts)]).send("hi")
    assert events  # the run went on: every contract names a tool


def test_a_sub_agent_called_as_a_tool_uses_an_id_its_caller_found(otel: Telemetry) -> None:
    # ADK runs an AgentTool's agent in a runner of its own (new session and invocation id)
    # with the caller's plugins: its calls are steps of the caller's trajectory.
    remover = LlmAgent(
        name="remover",
        description="removes contacts by id",
        model=scripted(
            [("remove_contact", {"contact_id": "id_1"})],
            [("remove_contact", {"contact_id": "+1"})],  # a phone number: still checked
        ),
        tools=[remove_contact],
    )
    root = LlmAgent(
        name="root",
        model=scripted(
            [("search_contacts", {"phone": "+1"})],
            [("remover", {"request": "remove contact id_1"})],
            [("remove_contact", {"contact_id": "id_1"})],  # the sub-agent removed it
        ),
        tools=[search_contacts, remove_contact, AgentTool(agent=remover)],
    )
    guard = otel.guard()
    session = chat(root, [ToolGuardPlugin(guard, contracts=CONTRACTS)])
    session.send("Delete +1")
    (summary,) = otel.summaries()
    assert summary.attributes is not None
    assert summary.attributes["toolguard.trajectory.length"] == 5
    steps = sorted(
        (
            int(s.attributes["toolguard.step"]),
            str(s.attributes["gen_ai.tool.name"]),
            str(s.attributes["toolguard.decision"]),
        )
        for s in otel.call_spans()
        if s.attributes
    )
    assert [(step, tool) for step, tool, _ in steps] == [
        (1, "search_contacts"),
        (2, "remover"),
        (3, "remove_contact"),
        (4, "remove_contact"),
        (5, "remove_contact"),
    ]
    assert [d for _, _, d in steps][2:] == ["allowed", "blocked", "blocked"]
