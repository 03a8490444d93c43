"""The paper's contact-removal example (docs/protocol.md section 3) through the real guard.

Trajectory A: remove_contact("+1-555-0199") is rejected (a phone number is not a contact id),
search_contact(phone) succeeds, remove_contact("id_8923") succeeds, Y = 1: T = 3, FED = 1.
Trajectory B: search then remove, Y = 1: T = 2, FED = 3.
"""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

import toolguard as tg

PHONE = "+1-555-0199"
CONTACT_ID = "id_8923"


class Contact(BaseModel):
    id: str
    name: str
    phone: str


class ContactsDB:
    def __init__(self) -> None:
        self.contacts = {CONTACT_ID: Contact(id=CONTACT_ID, name="Alex", phone=PHONE)}


def build(otel):
    db = ContactsDB()
    guard = otel.guard(state=db)

    @guard.tool(produces={"id": "contact_id"})
    def search_contact(phone: str) -> list[Contact]:
        return [c for c in db.contacts.values() if c.phone == phone]

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
    )
    def remove_contact(contact_id: str) -> dict:
        del db.contacts[contact_id]
        return {"removed": contact_id}

    return db, guard


LABELS = {"model": "m", "method": "react", "dataset": "toolsandbox", "task": "remove"}

CALL_KEYS_VALID = {
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.tool.type",
    "toolguard.trajectory.id",
    "toolguard.step",
    "toolguard.valid",
    "toolguard.decision",
}
CALL_KEYS_INVALID = CALL_KEYS_VALID | {
    "toolguard.cause",
    "toolguard.check",
    "toolguard.message",
    "toolguard.failed_checks",
    "error.type",
}


def common(span, tool: str, traj: str, step: int) -> None:
    a = span.attributes
    assert span.name == f"execute_tool {tool}"
    assert span.kind is SpanKind.INTERNAL
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.tool.name"] == tool
    assert a["gen_ai.tool.type"] == "function"
    assert a["toolguard.trajectory.id"] == traj
    assert a["toolguard.step"] == step
    assert isinstance(a["toolguard.step"], int)


def test_trajectory_a_repaired(otel):
    db, guard = build(otel)
    with otel.trajectory("A", labels=LABELS, user_input=f"Remove the contact {PHONE}") as traj:
        first = guard.call("remove_contact", {"contact_id": PHONE}, call_id="c1")
        assert isinstance(first, tg.Rejection)
        assert first.cause == "dependency"
        text = str(first)
        assert "contact_id" in text and PHONE in text
        found = guard.call("search_contact", {"phone": PHONE}, call_id="c2")
        assert [c.id for c in found] == [CONTACT_ID]
        assert guard.call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c3") == {
            "removed": CONTACT_ID
        }
        traj.success = True
    assert db.contacts == {}

    spans = otel.spans()
    assert len(spans) == 4  # three calls, one summary: nothing else
    calls = otel.call_spans("A")
    summary = otel.summary("A")
    assert [s.attributes["toolguard.step"] for s in calls] == [1, 2, 3]

    c1, c2, c3 = calls
    common(c1, "remove_contact", "A", 1)
    common(c2, "search_contact", "A", 2)
    common(c3, "remove_contact", "A", 3)
    assert set(c1.attributes) == CALL_KEYS_INVALID | {"gen_ai.tool.call.id"}
    assert set(c2.attributes) == CALL_KEYS_VALID | {"gen_ai.tool.call.id"}
    assert set(c3.attributes) == CALL_KEYS_VALID | {"gen_ai.tool.call.id"}
    assert [s.attributes["gen_ai.tool.call.id"] for s in calls] == ["c1", "c2", "c3"]

    a1 = c1.attributes
    assert a1["toolguard.valid"] is False
    assert a1["toolguard.cause"] == "dependency"
    assert a1["toolguard.check"] == "dependency.contact_id"
    assert a1["toolguard.failed_checks"] == ("dependency.contact_id",)
    assert a1["error.type"] == "toolguard.dependency"
    assert a1["toolguard.decision"] == "blocked"
    # Privacy: the argument value is in the model's message, never in telemetry.
    assert PHONE not in a1["toolguard.message"] and PHONE not in c1.status.description
    assert c1.status.status_code is StatusCode.ERROR

    for span in (c2, c3):
        assert span.attributes["toolguard.valid"] is True
        assert span.attributes["toolguard.decision"] == "allowed"
        assert span.status.status_code is StatusCode.UNSET

    assert summary.name == "toolguard.trajectory"
    assert dict(summary.attributes) == {
        "toolguard.trajectory.id": "A",
        "toolguard.trajectory.length": 3,
        "toolguard.trajectory.first_error_depth": 1,
        "toolguard.trajectory.first_error.cause": "dependency",
        "toolguard.trajectory.success": True,
        **{f"toolguard.label.{k}": v for k, v in LABELS.items()},
    }
    assert summary.status.status_code is StatusCode.UNSET
    for span in calls:
        assert span.parent is not None
        assert span.parent.span_id == summary.context.span_id
        assert span.context.trace_id == summary.context.trace_id
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (3, 1, "dependency")


def test_trajectory_b_clean(otel):
    db, guard = build(otel)
    with otel.trajectory("B", labels=LABELS) as traj:
        found = guard.call("search_contact", {"phone": PHONE})
        guard.call("remove_contact", {"contact_id": found[0].id})
        traj.success = True
    assert db.contacts == {}
    calls = otel.call_spans("B")
    assert [
        (
            s.name,
            s.attributes["toolguard.step"],
            s.attributes["toolguard.valid"],
            s.attributes["toolguard.decision"],
        )
        for s in calls
    ] == [
        ("execute_tool search_contact", 1, True, "allowed"),
        ("execute_tool remove_contact", 2, True, "allowed"),
    ]
    summary = otel.summary("B").attributes
    assert summary["toolguard.trajectory.length"] == 2
    assert summary["toolguard.trajectory.first_error_depth"] == 3
    assert "toolguard.trajectory.first_error.cause" not in summary
    assert summary["toolguard.trajectory.success"] is True


def test_cohort_a_and_b_in_one_process(otel):
    """Both trajectories against one guard: each has its own steps and summary."""
    _, guard = build(otel)
    with otel.trajectory("A") as a:
        guard.call("remove_contact", {"contact_id": PHONE})
        guard.call("search_contact", {"phone": PHONE})
        guard.call("remove_contact", {"contact_id": CONTACT_ID})
        a.success = True
    with otel.trajectory("B") as b:
        guard.call("search_contact", {"phone": PHONE})  # already removed: empty result
        guard.call("remove_contact", {"contact_id": CONTACT_ID})  # not produced in B
        b.success = False
    fed = {
        s.attributes["toolguard.trajectory.id"]: (
            s.attributes["toolguard.trajectory.length"],
            s.attributes["toolguard.trajectory.first_error_depth"],
            s.attributes["toolguard.trajectory.success"],
        )
        for s in otel.summary_spans()
    }
    assert fed == {"A": (3, 1, True), "B": (2, 2, False)}


def test_summary_on_exception_and_unknown_outcome(otel):
    _, guard = build(otel)
    with pytest.raises(ZeroDivisionError), otel.trajectory("C"):
        guard.call("search_contact", {"phone": PHONE})
        raise ZeroDivisionError("the agent loop crashed")
    summary = otel.summary("C")
    a = summary.attributes
    assert a["toolguard.trajectory.length"] == 1
    assert a["toolguard.trajectory.first_error_depth"] == 2
    assert "toolguard.trajectory.success" not in a  # unknown
    assert summary.status.status_code is StatusCode.ERROR
    assert tg.current_trajectory() is None


def test_empty_trajectory(otel):
    with otel.trajectory("E") as traj:
        traj.success = False
    a = otel.summary("E").attributes
    assert a["toolguard.trajectory.length"] == 0
    assert a["toolguard.trajectory.first_error_depth"] == 1
    assert a["toolguard.trajectory.success"] is False
