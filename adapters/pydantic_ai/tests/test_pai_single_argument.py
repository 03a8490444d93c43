"""A tool whose only parameter is model-like (a pydantic model, a dataclass, a TypedDict):
Pydantic AI shows the model that type's fields and validates them into one instance. The
guard judges what the model sent against what it was shown, the fields, and a contract names
those fields."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import toolguard as tg
from conftest import Telemetry, returns, scripted
from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ToolCallPart, ToolReturnPart
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12


class PersonModel(BaseModel):
    name: str
    email: str


@dataclasses.dataclass
class PersonDataclass:
    name: str
    email: str


class PersonDict(TypedDict):
    name: str
    email: str


class Removal(BaseModel):
    contact_id: str
    reason: str


class AliasedPerson(BaseModel):
    name: str
    email: str = Field(alias="emailAddress")


def person_agent(
    guard: tg.Guard, kind: type, args: dict[str, Any], **contracts: tg.ToolOptions
) -> tuple[Agent[None, str], list[Any]]:
    from toolguard_pydantic_ai import ToolGuard

    added: list[Any] = []

    def add_person(person: Any) -> str:
        """Add a person."""
        added.append(person)
        return "added"

    add_person.__annotations__["person"] = kind  # the type under test, not a name to resolve

    model = scripted([ToolCallPart("add_person", args, tool_call_id="c1")])
    agent = Agent(model, tools=[add_person], capabilities=[ToolGuard(guard, contracts=contracts)])
    return agent, added


def answer(result: Any) -> ToolReturnPart:
    [request] = [m for m in result.all_messages() if isinstance(m, ModelRequest) and returns(m)]
    return returns(request)["c1"]


@pytest.mark.parametrize(
    ("kind", "args"),
    [
        (PersonModel, {"name": "Al", "email": "al@x.org"}),
        (PersonDataclass, {"name": "Al", "email": "al@x.org"}),
        (PersonDict, {"name": "Al", "email": "al@x.org"}),
        (AliasedPerson, {"name": "Al", "emailAddress": "al@x.org"}),
    ],
    ids=["pydantic", "dataclass", "typeddict", "alias"],
)
def test_a_legal_call_runs_without_a_contract(
    otel: Telemetry, kind: type, args: dict[str, Any]
) -> None:
    agent, added = person_agent(otel.guard(), kind, args)
    result = agent.run_sync("add Al")

    assert answer(result).outcome == "success"
    assert len(added) == 1


@pytest.mark.parametrize("kind", [PersonModel, PersonDataclass, PersonDict])
@pytest.mark.parametrize(("prompt", "runs"), [("add al@x.org", True), ("add Al", False)])
def test_a_contract_names_the_fields_the_model_sees(
    otel: Telemetry, kind: type, prompt: str, runs: bool
) -> None:
    seen: list[Any] = []
    pre = tg.Precondition("named", lambda name: seen.append(name) or True)
    agent, added = person_agent(
        otel.guard(),
        kind,
        {"name": "Al", "email": "al@x.org"},
        add_person={"grounded": ["email"], "preconditions": [pre]},
    )
    result = agent.run_sync(prompt)

    assert (answer(result).outcome == "success") is runs
    assert len(added) == int(runs)
    if not runs:
        assert "(information)" in str(answer(result).content)
    assert seen in (["Al"], [])  # a predicate gets the field's validated value


def test_refs_on_a_field_of_the_model(otel: Telemetry) -> None:
    from toolguard_pydantic_ai import ToolGuard

    removed: list[str] = []

    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [{"id": "id_8923"}]

    def remove_contact(removal: Removal) -> str:
        """Remove a contact."""
        removed.append(removal.contact_id)
        return "removed"

    model = scripted(
        [ToolCallPart("remove_contact", {"contact_id": "+1-555", "reason": "x"})],
        [ToolCallPart("search_contacts", {"phone": "+1-555"})],
        [ToolCallPart("remove_contact", {"contact_id": "id_8923", "reason": "x"})],
    )
    guard = otel.guard()
    contracts: dict[str, tg.ToolOptions] = {
        "search_contacts": {"produces": {"id": "contact_id"}},
        "remove_contact": {"refs": {"contact_id": "contact_id"}},
    }
    agent = Agent(
        model,
        tools=[search_contacts, remove_contact],
        capabilities=[ToolGuard(guard, contracts=contracts)],
    )
    with guard.trajectory("t") as traj:
        agent.run_sync("remove +1-555")

    assert removed == ["id_8923"]
    assert [v.check for v in traj.verdicts][:1] == ["dependency.contact_id"]
    assert traj.first_error_depth == 1


def test_a_contract_naming_the_parameter_is_refused(otel: Telemetry) -> None:
    agent, added = person_agent(
        otel.guard(), PersonModel, {"name": "Al", "email": "e"}, add_person={"grounded": ["person"]}
    )
    with pytest.raises(tg.ToolDefinitionError, match=r"grounded names 'person'.*email, name"):
        agent.run_sync("add Al")
    assert added == []


def test_a_tool_the_user_declared_gets_the_validated_arguments(otel: Telemetry) -> None:
    guard = otel.guard()
    got: list[Any] = []
    guard.declare(
        "add_person",
        json_schema={"type": "object", "properties": {"person": {}}},
        preconditions=[tg.Precondition("p", lambda person: got.append(person) or True)],
    )
    agent, added = person_agent(guard, PersonModel, {"name": "Al", "email": "e"})
    agent.run_sync("add Al")

    assert len(added) == 1
    assert got == [PersonModel(name="Al", email="e")]
