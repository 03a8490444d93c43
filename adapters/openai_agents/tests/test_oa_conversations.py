"""Multi-turn chat (issue 23): each ``Runner.run`` is its own trajectory, and an id the agent
saw in an earlier turn (a ``function_call_output`` in the input: ``to_input_list()`` sent
back, or a ``Session``'s history) is bound before the run's first call, so the legal
follow-up is not blocked. An id the history never showed is still blocked."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, SQLiteSession, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_contacts import (
    CONTACT_ID,
    PHONE,
    address_book,
    approval_agent,
    contacts_agent,
)
from oa_support import NO_SDK_TRACING, Telemetry

from toolguard_openai_agents import guard_agent, run, run_sync
from toolguard_openai_agents._history import state_items

SCRIPT = [
    [function_call("search_contact", {"phone": PHONE}, call_id="c1")],
    [assistant_message("Found Alex. Remove?")],
    [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c2")],
    [assistant_message("Removed.")],
]


def two_turns(otel: Telemetry, how: str, mode: str, script: list[Any] = SCRIPT) -> Any:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent, _ = contacts_agent(guard, contacts, script)
    session = SQLiteSession("chat-1") if how == "session" else None
    options: dict[str, Any] = {"run_config": NO_SDK_TRACING}
    if session is not None:
        options["session"] = session

    def go(input: Any) -> Any:
        if mode == "sync":
            return run_sync(guard, agent, input, **options)
        return asyncio.run(run(guard, agent, input, **options))

    first = go(f"Find {PHONE}")
    if how == "session":
        go("Yes, remove them.")
    else:
        go([*first.to_input_list(), {"role": "user", "content": "Yes, remove them."}])
    return contacts


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("how", ["to_input_list", "session"])
def test_two_turns(otel: Telemetry, how: str, mode: str) -> None:
    contacts = two_turns(otel, how, mode)

    assert contacts == {}
    summaries = [dict(s.attributes or {}) for s in otel.spans() if s.name == "toolguard.trajectory"]
    assert len(summaries) == 2
    assert summaries[1]["toolguard.trajectory.length"] == 1
    assert summaries[1]["toolguard.trajectory.first_error_depth"] == 2
    if how == "session":
        assert [s["gen_ai.conversation.id"] for s in summaries] == ["chat-1", "chat-1"]


@pytest.mark.parametrize("how", ["to_input_list", "session"])
def test_an_id_the_history_never_showed_is_still_blocked(otel: Telemetry, how: str) -> None:
    script = [
        *SCRIPT[:2],
        [function_call("remove_contact", {"contact_id": "id_0001"}, call_id="c2")],
    ]
    script.append([assistant_message("Could not.")])
    contacts = two_turns(otel, how, "sync", script)

    assert contacts  # nothing removed
    second = [s for s in otel.spans() if s.name == "toolguard.trajectory"][1]
    assert (second.attributes or {})["toolguard.trajectory.first_error.cause"] == "dependency"


def test_a_model_in_a_new_process_reads_the_history_as_text(otel: Telemetry) -> None:
    """The raw results are gone (another process): a JSON output still binds."""
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent, _ = contacts_agent(guard, contacts, SCRIPT[2:])
    history = [
        {"role": "user", "content": f"Find {PHONE}"},
        {"type": "function_call", "call_id": "old1", "name": "search_contact",
         "arguments": '{"phone": "+1-555-0199"}'},
        {"type": "function_call_output", "call_id": "old1",
         "output": '[{"id": "id_8923", "name": "Alex", "phone": "+1-555-0199"}]'},
        {"role": "user", "content": "Yes, remove them."},
    ]  # fmt: skip
    run_sync(guard, agent, history, run_config=NO_SDK_TRACING)
    assert contacts == {}


def _orders(orders: dict[int, str], script: list[Any]) -> tuple[Any, Any]:
    @function_tool
    def create_order(item: str) -> int:
        """Create an order; returns its number."""
        orders[8923] = item
        return 8923

    @function_tool
    def cancel_order(order_id: int) -> str:
        """Cancel an order by its number."""
        del orders[order_id]
        return "cancelled"

    model = ScriptedModel(script)
    agent = Agent(name="shop", model=model, tools=[create_order, cancel_order])
    contracts = {
        "create_order": {"produces": {"$": "order_id"}},
        "cancel_order": {"refs": {"order_id": "order_id"}},
    }
    return agent, contracts


@pytest.mark.parametrize("how", ["to_input_list", "session"])
def test_an_int_id_from_an_earlier_run_keeps_its_type(otel: Telemetry, how: str) -> None:
    orders: dict[int, str] = {}
    agent, contracts = _orders(
        orders,
        [
            [function_call("create_order", {"item": "book"}, call_id="c1")],
            [assistant_message("Order 8923 created.")],
            [function_call("cancel_order", {"order_id": 8923}, call_id="c2")],
            [assistant_message("Cancelled.")],
        ],
    )
    guard = otel.guard()
    agent = guard_agent(agent, guard, contracts=contracts)
    options: dict[str, Any] = {"run_config": NO_SDK_TRACING}
    if how == "session":
        options["session"] = SQLiteSession("orders-1")
    first = run_sync(guard, agent, "Order a book", **options)
    follow_up = "Cancel it."
    if how == "to_input_list":
        follow_up = [*first.to_input_list(), {"role": "user", "content": follow_up}]
    run_sync(guard, agent, follow_up, **options)

    assert orders == {}


def test_a_number_in_a_new_process_binds_as_text_and_as_number(otel: Telemetry) -> None:
    """The raw result is gone (another process): "8923" may have been an int or a str."""
    orders = {8923: "book"}
    agent, contracts = _orders(
        orders,
        [
            [function_call("cancel_order", {"order_id": 8923}, call_id="c2")],
            [assistant_message("Cancelled.")],
        ],
    )
    guard = otel.guard()
    agent = guard_agent(agent, guard, contracts=contracts)
    history = [
        {"role": "user", "content": "Order a book"},
        {"type": "function_call", "call_id": "old1", "name": "create_order",
         "arguments": '{"item": "book"}'},
        {"type": "function_call_output", "call_id": "old1", "output": "8923"},
        {"role": "user", "content": "Cancel it."},
    ]  # fmt: skip
    run_sync(guard, agent, history, run_config=NO_SDK_TRACING)
    assert orders == {}


def _paused(otel: Telemetry, contact_id: str) -> tuple[Any, Any, Any, Any]:
    """A run paused for the approval of remove_contact(contact_id), after a search."""
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = approval_agent(guard, contacts, contact_id)
    first = run_sync(guard, agent, f"Remove {PHONE}", run_config=NO_SDK_TRACING)
    state = first.to_state()
    for item in first.interruptions:
        state.approve(item)
    return guard, agent, state, contacts


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_approved_call_resumed_in_a_new_run_sees_the_earlier_results(
    otel: Telemetry, mode: str
) -> None:
    guard, agent, state, contacts = _paused(otel, CONTACT_ID)
    if mode == "sync":
        run_sync(guard, agent, state, run_config=NO_SDK_TRACING)
    else:
        asyncio.run(run(guard, agent, state, run_config=NO_SDK_TRACING))

    assert contacts == {}
    second = [s for s in otel.spans() if s.name == "toolguard.trajectory"][1]
    assert (second.attributes or {})["toolguard.trajectory.first_error_depth"] == 2  # none


def test_an_approved_call_with_an_id_never_shown_is_still_blocked(otel: Telemetry) -> None:
    guard, agent, state, contacts = _paused(otel, "id_0001")
    run_sync(guard, agent, state, run_config=NO_SDK_TRACING)

    assert contacts
    second = [s for s in otel.spans() if s.name == "toolguard.trajectory"][1]
    assert (second.attributes or {})["toolguard.trajectory.first_error.cause"] == "dependency"


def test_the_run_state_fields_a_resume_reads(otel: Telemetry) -> None:
    # Pins the RunState fields of openai-agents 0.24 that state_items reads: if a new SDK
    # renames them, this fails instead of approved calls being blocked after a resume.
    _, _, state, _ = _paused(otel, CONTACT_ID)
    items = state_items(state)
    assert items[0] == {"role": "user", "content": f"Remove {PHONE}"}
    assert [(i.get("type"), i.get("call_id")) for i in items[1:]] == [
        ("function_call", "c1"),
        ("function_call_output", "c1"),
        ("function_call", "c2"),
    ]


ADDRESS = "al@example.org"


def _mailer(otel: Telemetry, script: list[Any]) -> tuple[Any, Any, list[str]]:
    sent: list[str] = []

    @function_tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        sent.append(to)
        return "sent"

    guard = otel.guard()
    agent = Agent(name="mail", model=ScriptedModel(script), tools=[send_email])
    return guard, guard_agent(agent, guard, contracts={"send_email": {"grounded": ["to"]}}), sent


SEND = [function_call("send_email", {"to": ADDRESS, "body": "hi"}, call_id="m1")]


@pytest.mark.parametrize(
    "content",
    [f"Email {ADDRESS} to say hi", [{"type": "input_text", "text": f"Email {ADDRESS}"}]],
    ids=["text", "parts"],
)
def test_a_value_the_user_typed_in_a_message_list_is_seen(otel: Telemetry, content: Any) -> None:
    guard, agent, sent = _mailer(otel, [SEND, [assistant_message("Sent.")]])
    run_sync(guard, agent, [{"role": "user", "content": content}], run_config=NO_SDK_TRACING)
    assert sent == [ADDRESS]


@pytest.mark.parametrize("how", ["to_input_list", "session"])
def test_a_value_the_user_typed_in_an_earlier_turn_is_seen(otel: Telemetry, how: str) -> None:
    script = [[assistant_message("Noted.")], SEND, [assistant_message("Sent.")]]
    guard, agent, sent = _mailer(otel, script)
    options: dict[str, Any] = {"run_config": NO_SDK_TRACING}
    if how == "session":
        options["session"] = SQLiteSession("mail-1")
    first = run_sync(guard, agent, f"My address is {ADDRESS}", **options)
    follow_up: Any = "Now send me a hello email."
    if how == "to_input_list":
        follow_up = [*first.to_input_list(), {"role": "user", "content": follow_up}]
    run_sync(guard, agent, follow_up, **options)
    assert sent == [ADDRESS]


def test_a_value_a_tool_the_guard_does_not_know_showed_earlier_is_seen(otel: Telemetry) -> None:
    """An earlier turn's output of a tool this agent's guard does not know (an MCP server's,
    a hosted tool, another agent's) is something the model saw: it grounds a later value,
    as the protocol counts every tool output; a value no output showed is still refused."""
    for shown, expected in ((ADDRESS, [ADDRESS]), ("someone@else.org", [])):
        guard, agent, sent = _mailer(otel, [SEND, [assistant_message("Done.")]])
        history = [
            {"role": "user", "content": "Find my address, then send me a hello email."},
            {"type": "function_call", "call_id": "m1", "name": "crm_lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "m1", "output": f'{{"email": "{shown}"}}'},
        ]
        run_sync(guard, agent, history, run_config=NO_SDK_TRACING)
        assert sent == expected


def test_a_value_only_the_assistant_or_developer_wrote_is_not_seen(otel: Telemetry) -> None:
    guard, agent, sent = _mailer(otel, [SEND, [assistant_message("Could not.")]])
    history = [
        {"role": "developer", "content": f"Never write to {ADDRESS}."},
        {"role": "user", "content": "Send a hello email."},
        {"role": "assistant", "content": f"To {ADDRESS}?"},
        {"role": "user", "content": "Yes."},
    ]
    run_sync(guard, agent, history, run_config=NO_SDK_TRACING)
    assert sent == []
    [summary] = [s for s in otel.spans() if s.name == "toolguard.trajectory"]
    assert (summary.attributes or {})["toolguard.trajectory.first_error.cause"] == "information"
