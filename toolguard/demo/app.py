"""A small stateful contacts-and-messages app, in the spirit of ToolSandbox's example.

Contacts are removed and messaged by internal id, never by phone number; sending needs the
cellular service on. Every tool is guarded; the declarations below are all the guard knows.
"""

from __future__ import annotations

import itertools

from pydantic import BaseModel

import toolguard as tg

MAX_TEXT = 160


class Contact(BaseModel):
    id: str
    name: str
    phone: str


class Phone:
    """The environment's state: what predicates read."""

    def __init__(self, contacts: list[tuple[str, str]], *, cellular: bool = True) -> None:
        self._ids = itertools.count(8923)
        self.contacts: dict[str, Contact] = {}
        self.messages: list[tuple[str, str]] = []
        self.cellular = cellular
        for name, phone in contacts:
            self._insert(name, phone)

    def _insert(self, name: str, phone: str) -> Contact:
        contact = Contact(id=f"id_{next(self._ids)}", name=name, phone=phone)
        self.contacts[contact.id] = contact
        return contact


def build_tools(phone: Phone, guard: tg.Guard) -> dict[str, object]:
    """Guard the app's tools on ``guard`` (whose state is ``phone``)."""

    @guard.tool(produces={"id": "contact_id"}, replace=True)
    def search_contacts(name: str | None = None, phone_number: str | None = None) -> list[Contact]:
        """Find contacts by name or phone number."""
        return [
            c
            for c in phone.contacts.values()
            if (name is None or c.name == name)
            and (phone_number is None or c.phone == phone_number)
        ]

    @guard.tool(produces={"id": "contact_id"}, grounded=["phone_number"], replace=True)
    def add_contact(name: str, phone_number: str) -> Contact:
        """Add a contact; the number must come from the conversation."""
        return phone._insert(name, phone_number)

    @guard.tool(
        refs={"contact_id": "contact_id"},
        invalidates={"contact_id": "contact_id"},
        preconditions=[
            tg.Precondition(
                "contact_exists",
                lambda state, contact_id: contact_id in state.contacts,
                "the contact must exist",
            )
        ],
        replace=True,
    )
    def remove_contact(contact_id: str) -> dict[str, str]:
        """Remove a contact by its internal id."""
        del phone.contacts[contact_id]
        return {"removed": contact_id}

    @guard.tool(
        refs={"contact_id": "contact_id"},
        preconditions=[
            tg.Precondition(
                "cellular_on", lambda state: state.cellular, "cellular service must be on"
            )
        ],
        replace=True,  # its {"error": ...} answers are the guard's default error result
    )
    def send_message(contact_id: str, text: str) -> dict[str, str]:
        """Send a text message to a contact."""
        if contact_id not in phone.contacts:
            return {"error": f"no contact {contact_id}"}
        if len(text) > MAX_TEXT:
            # Only the network knows this limit: the guard learns of it from the result.
            return {"error": f"message longer than {MAX_TEXT} characters"}
        phone.messages.append((contact_id, text))
        return {"sent": contact_id}

    @guard.tool(replace=True)
    def set_cellular(on: bool) -> dict[str, bool]:
        """Turn the cellular service on or off."""
        phone.cellular = on
        return {"cellular": on}

    return {
        "search_contacts": search_contacts,
        "add_contact": add_contact,
        "remove_contact": remove_contact,
        "send_message": send_message,
        "set_cellular": set_cellular,
    }
