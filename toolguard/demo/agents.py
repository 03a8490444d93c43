"""Scripted agents: fixed policies that call tools by name with JSON arguments, as a model would.

Each policy reads a rejection as the tool's answer and may recover, like the paper's agents.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import toolguard as tg

Call = Callable[[str, dict[str, Any]], Any]


@dataclass(frozen=True)
class Task:
    kind: str  # "remove", "message" or "add"
    name: str
    phone: str

    @property
    def user_input(self) -> str:
        if self.kind == "remove":
            return f"Please remove the contact with number {self.phone}."
        if self.kind == "message":
            return f"Text {self.name} that I am running late."
        return f"Add {self.name}, their number is {self.phone}."


def _rejected(result: Any) -> bool:
    return isinstance(result, tg.Rejection)


def _first_id(result: Any) -> str | None:
    if isinstance(result, list) and result:
        return str(result[0].id)
    return None


def clean(call: Call, task: Task) -> None:
    """Looks ids up before using them."""
    if task.kind == "add":
        call("add_contact", {"name": task.name, "phone_number": task.phone})
        return
    found = call("search_contacts", _lookup(task))
    contact_id = _first_id(found)
    if task.kind == "remove":
        call("remove_contact", {"contact_id": contact_id})
    else:
        call("send_message", {"contact_id": contact_id, "text": "Running late"})


def phone_as_id(call: Call, task: Task) -> None:
    """The paper's mistake: passes the phone number where an id belongs, then recovers."""
    if task.kind == "add":
        clean(call, task)
        return
    target = "remove_contact" if task.kind == "remove" else "send_message"
    extra = {} if task.kind == "remove" else {"text": "Running late"}
    result = call(target, {"contact_id": task.phone, **extra})
    if _rejected(result):
        contact_id = _first_id(call("search_contacts", {"phone_number": task.phone}))
        call(target, {"contact_id": contact_id, **extra})


def ignores_settings(call: Call, task: Task) -> None:
    """Sends without checking that the cellular service is on; turns it on when told."""
    if task.kind != "message":
        clean(call, task)
        return
    contact_id = _first_id(call("search_contacts", _lookup(task)))
    args = {"contact_id": contact_id, "text": "Running late"}
    if _rejected(call("send_message", args)):
        call("set_cellular", {"on": True})
        call("send_message", args)


def invents(call: Call, task: Task) -> None:
    """Makes up a value it was never given, and does not recover from it."""
    if task.kind == "add":
        call("add_contact", {"name": task.name, "phone_number": "+1-555-0100"})
        return
    # Passes the number as a JSON number: a schema error, fixed on the second try.
    result = call("search_contacts", {"phone_number": 15550199} if task.kind == "remove" else {})
    if _rejected(result) or not result:
        result = call("search_contacts", _lookup(task))
    clean_rest = "remove_contact" if task.kind == "remove" else "send_message"
    extra = {} if task.kind == "remove" else {"text": "Running late"}
    call(clean_rest, {"contact_id": _first_id(result), **extra})


def verbose(call: Call, task: Task) -> None:
    """Writes messages too long for the network; shortens them when the send fails."""
    if task.kind != "message":
        clean(call, task)
        return
    contact_id = _first_id(call("search_contacts", _lookup(task)))
    long_text = "Running late, " + "so sorry about this, " * 10 + "see you soon."
    sent = call("send_message", {"contact_id": contact_id, "text": long_text})
    if isinstance(sent, dict) and "error" in sent:  # the environment's own answer
        call("send_message", {"contact_id": contact_id, "text": "Running late, sorry."})


def _lookup(task: Task) -> dict[str, str]:
    return {"phone_number": task.phone} if task.kind == "remove" else {"name": task.name}


POLICIES: dict[str, Callable[[Call, Task], None]] = {
    "clean": clean,
    "phone_as_id": phone_as_id,
    "ignores_settings": ignores_settings,
    "invents": invents,
    "verbose": verbose,
}


def as_model_call(guard: tg.Guard) -> Call:
    """Dispatch by name with JSON text, the way a model's tool call arrives."""
    return lambda name, args: guard.call(name, json.dumps(args))
