"""A small stateful contacts-and-messages app, in the spirit of ToolSandbox's example.

Contacts are removed and messaged by internal id, never by phone number; sending needs the
cellular service on. Every tool is guarded; the declarations below are all the guard knows.
Each tool reads the app through its ``tg.State`` parameter (the guard's state), so the guard
can also run it on a copy of the app: the Dual-Loop agent verifies its plans that way.
"""

from __future__ import annotations

from typing import Annotated

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
        self._next_id = 8923  # an int, not an itertools.count: the app is deep-copied
        self.contacts: dict[str, Contact] = {}
        self.messages: list[tuple[str, str]] = []
        self.cellular = cellular
        for name, phone in contacts:
            self._insert(name, phone)

    def _insert(self, name: str, phone: str) -> Contact:
        contact = Contact(id=f"id_{self._next_id}", name=name, phone=phone)
        self._next_id += 1
        self.contacts[contact.id] = contact
        return contact


App = Annotated[Phone, tg.State]
"""A tool's ``app`` parameter: the guard's state, hidden from the model's schema."""


def build_tools(phone: Phone, guard: tg.Guard) -> dict[str, object]:
    """Guard the app's tools on ``guard`` (whose state is ``phone``: each tool's ``app``)."""

    @guard.tool(produces={"id": "contact_id"}, replace=True)
    def search_contacts(
        app: App, name: str | None = None, phone_number: str | None = None
    ) -> list[Contact]:
        """Find contacts by name or phone number."""
        return [
            c
            for c in app.contacts.values()
            if (name is None or c.name == name)
            and (phone_number is None or c.phone == phone_number)
        ]

    @guard.tool(produces={"id": "contact_id"}, grounded=["phone_number"], replace=True)
    def add_contact(app: App, name: str, phone_number: str) -> Contact:
        """Add a contact; the number must come from the conversation."""
        return app._insert(name, phone_number)

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
    def remove_contact(app: App, contact_id: str) -> dict[str, str]:
        """Remove a contact by its internal id."""
        del app.contacts[contact_id]
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
    def send_message(app: App, contact_id: str, text: str) -> dict[str, str]:
        """Send a text message to a contact."""
        if contact_id not in app.contacts:
            return {"error": f"no contact {contact_id}"}
        if len(text) > MAX_TEXT:
            # Only the network knows this limit: the guard learns of it from the result.
            return {"error": f"message longer than {MAX_TEXT} characters"}
        app.messages.append((contact_id, text))
        return {"sent": contact_id}

    @guard.tool(replace=True)
    def set_cellular(app: App, on: bool) -> dict[str, bool]:
        """Turn the cellular service on or off."""
        app.cellular = on
        return {"cellular": on}

    return {
        "search_contacts": search_contacts,
        "add_contact": add_contact,
        "remove_contact": remove_contact,
        "send_message": send_message,
        "set_cellular": set_cellular,
    }
