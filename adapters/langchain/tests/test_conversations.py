"""Multi-turn chat (issue 23): each ``invoke`` is its own trajectory, and an id the agent saw
in an earlier turn of the same conversation (a tool result in the message history) is bound
before the run's first call, so the legal follow-up is not blocked. Whether the history comes
from a checkpointer (thread id) or is sent back by the caller."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
import toolguard as tg
from conftest import PHONE, AddressBook, Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel

from toolguard_langchain import ToolGuardMiddleware, declare_tool

FIRST = {"messages": [("user", f"Find the contact with phone {PHONE}")]}
SECOND = "Yes, remove her."
SCRIPT = (
    turn(call("search_contacts", {"phone": PHONE}, "c1")),
    "Found Alice. Remove her?",
    turn(call("remove_contact", {"contact_id": "id_8923"}, "c2")),
    "Removed.",
)


def statuses(out: dict[str, Any]) -> list[str]:
    return [m.status for m in out["messages"] if isinstance(m, ToolMessage)]


def test_two_turns_on_a_checkpointed_thread(book: AddressBook, spans: Spans) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    agent = create_agent(
        scripted(*SCRIPT),
        book.tools,
        middleware=[ToolGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "chat-1"}}
    agent.invoke(FIRST, config)
    out = agent.invoke({"messages": [("user", SECOND)]}, config)

    assert statuses(out) == ["success", "success"]
    assert book.contacts == {}
    first, second = (dict(s.attributes or {}) for s in spans.summaries())
    assert first["toolguard.trajectory.id"] != second["toolguard.trajectory.id"]
    assert second["toolguard.trajectory.length"] == 1
    assert second["toolguard.trajectory.first_error_depth"] == 2
    assert first["gen_ai.conversation.id"] == second["gen_ai.conversation.id"] == "chat-1"


def test_two_turns_with_the_history_sent_back(book: AddressBook, spans: Spans) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    agent = create_agent(scripted(*SCRIPT), book.tools, middleware=[ToolGuardMiddleware(guard)])
    out = agent.invoke(FIRST)
    out = agent.invoke({"messages": [*out["messages"], HumanMessage(SECOND)]})

    assert statuses(out) == ["success", "success"]
    assert book.contacts == {}


def test_an_id_the_history_never_showed_is_still_blocked(book: AddressBook, spans: Spans) -> None:
    guard = tg.Guard(state=book.contacts, tracer_provider=spans.provider)
    book.declare(guard)
    script = (*SCRIPT[:2], turn(call("remove_contact", {"contact_id": "id_0001"}, "c2")), "No.")
    agent = create_agent(
        scripted(*script),
        book.tools,
        middleware=[ToolGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "chat-2"}}
    agent.invoke(FIRST, config)
    out = agent.invoke({"messages": [("user", SECOND)]}, config)

    assert statuses(out) == ["success", "error"]
    second = dict(spans.summaries()[1].attributes or {})
    assert second["toolguard.trajectory.first_error.cause"] == "dependency"


class Contact(BaseModel):
    id: str
    phone: str


@pytest.mark.parametrize("checkpointed", [True, False])
def test_objects_in_an_earlier_turn_bind_too(checkpointed: bool, spans: Spans) -> None:
    """A result LangChain could only str() (a pydantic model) in the history."""
    removed: list[str] = []

    @tool
    def search_contacts(phone: str) -> list[Contact]:
        """Contacts with this phone number."""
        return [Contact(id="id_8923", phone=phone)]

    @tool
    def remove_contact(contact_id: str) -> str:
        """Remove a contact by its id."""
        removed.append(contact_id)
        return "removed"

    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, search_contacts, produces={"id": "contact_id"})
    declare_tool(guard, remove_contact, refs={"contact_id": "contact_id"})
    agent = create_agent(
        scripted(*SCRIPT),
        [search_contacts, remove_contact],
        middleware=[ToolGuardMiddleware(guard)],
        checkpointer=InMemorySaver() if checkpointed else None,
    )
    config: Any = {"configurable": {"thread_id": "chat-3"}}
    out = agent.invoke(FIRST, config)
    again = (
        {"messages": [("user", SECOND)]}
        if checkpointed
        else {"messages": [*out["messages"], HumanMessage(SECOND)]}
    )
    out = agent.invoke(again, config)

    assert removed == ["id_8923"], statuses(out)


@pytest.mark.parametrize("answer", ["command", "message"])
def test_a_tool_answering_with_its_own_message_binds_in_later_turns(
    answer: str, spans: Spans
) -> None:
    """A tool that builds its answer (a ``Command`` updating the messages, or a
    ``ToolMessage``): the later turn reads the message it holds, as the call itself did,
    not the object (whose uuid ``id`` is no contact id)."""
    removed: list[str] = []

    @tool
    def search_contacts(
        phone: str, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> Command[Any] | ToolMessage:
        """Contacts with this phone number."""
        content = json.dumps({"id": "id_8923", "phone": phone})
        message = ToolMessage(content=content, tool_call_id=tool_call_id)
        return Command(update={"messages": [message]}) if answer == "command" else message

    @tool
    def remove_contact(contact_id: str) -> str:
        """Remove a contact by its id."""
        removed.append(contact_id)
        return "removed"

    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, search_contacts, produces={"id": "contact_id"})
    declare_tool(guard, remove_contact, refs={"contact_id": "contact_id"})
    agent = create_agent(
        scripted(*SCRIPT),
        [search_contacts, remove_contact],
        middleware=[ToolGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": f"chat-{answer}"}}
    agent.invoke(FIRST, config)
    out = agent.invoke({"messages": [("user", SECOND)]}, config)

    assert statuses(out) == ["success", "success"]
    assert removed == ["id_8923"]


def test_a_produces_callable_failing_on_an_earlier_error_result_breaks_no_later_turn(
    caplog: pytest.LogCaptureFixture, spans: Spans
) -> None:
    """Turn 1's search finds nothing (``{"found": ...}``, no error but no ``id`` for the
    callable to read); every later run replays it with the history. It is logged, and the id
    turn 2's search found still binds for turn 3. (An error result binds nothing, when the
    call runs and in later turns: the callable never reads it.)"""
    book = {"id_8923": {"id": "id_8923", "phone": PHONE}}

    @tool
    def search_contacts(phone: str) -> dict[str, str]:
        """The contact with this phone number."""
        found = [c for c in book.values() if c["phone"] == phone]
        return found[0] if found else {"found": f"no contact with phone {phone}"}

    @tool
    def remove_contact(contact_id: str) -> str:
        """Remove a contact by its id."""
        del book[contact_id]
        return "removed"

    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, search_contacts, produces={(lambda r: [r["id"]]): "contact_id"})
    declare_tool(guard, remove_contact, refs={"contact_id": "contact_id"})
    script = (
        turn(call("search_contacts", {"phone": "+1-555-0000"}, "c1")),
        "No such contact.",
        turn(call("search_contacts", {"phone": PHONE}, "c2")),
        "Found her.",
        turn(call("remove_contact", {"contact_id": "id_8923"}, "c3")),
        "Removed.",
    )
    agent = create_agent(
        scripted(*script),
        [search_contacts, remove_contact],
        middleware=[ToolGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "chat-error-result"}}
    agent.invoke({"messages": [("user", "Find +1-555-0000")]}, config)
    agent.invoke({"messages": [("user", f"Find {PHONE} then")]}, config)
    out = agent.invoke({"messages": [("user", SECOND)]}, config)

    assert statuses(out) == ["success", "success", "success"]
    assert book == {}
    assert "reading an earlier result of search_contacts failed" in caplog.text


@pytest.mark.parametrize(("order", "status"), [("ORD-456", "success"), ("ORD-789", "error")])
def test_a_grounded_value_an_undeclared_tool_showed_in_an_earlier_request(
    order: str, status: str, spans: Spans
) -> None:
    """A stateless server: each request a fresh guard and agent, the client sending the
    history back. ``list_orders`` is declared by the middleware on its first call, so the
    second request's guard does not know it yet when it reads the history; what it showed
    is seen all the same (and a value it never showed is still refused)."""

    @tool
    def list_orders(customer: str) -> str:
        """Orders of a customer."""
        return "Orders: ORD-123 (shipped), ORD-456 (pending)"

    @tool
    def cancel_order(order_id: str) -> str:
        """Cancel an order."""
        return f"cancelled {order_id}"

    def request(history: list[Any], *script: Any) -> list[Any]:
        guard = tg.Guard(tracer_provider=spans.provider)
        declare_tool(guard, cancel_order, grounded=["order_id"])
        agent = create_agent(
            scripted(*script), [list_orders, cancel_order], middleware=[ToolGuardMiddleware(guard)]
        )
        return list(agent.invoke({"messages": history})["messages"])

    history = request(
        [HumanMessage("What are my orders?")],
        turn(call("list_orders", {"customer": "me"}, "c1")),
        "You have ORD-123 and ORD-456.",
    )
    history = request(
        [*history, HumanMessage("Cancel the pending one.")],
        turn(call("cancel_order", {"order_id": order}, "c2")),
        "Done.",
    )

    assert statuses({"messages": history}) == ["success", status]
