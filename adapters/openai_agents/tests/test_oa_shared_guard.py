"""Two agents sharing one Guard, each with its own function tool of one name but other
parameters: a Guard knows one tool per name, so the second agent's legal calls were checked
against the first tool's schema and all blocked. The declaration now accepts either tool's
arguments, and the developer is warned, with the tool named."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from agents import Agent, FunctionTool, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_support import Episode, Telemetry, tool_outputs
from pydantic import BaseModel

import toolguard as tg
from toolguard_openai_agents import guard_agent


@function_tool
def search(query: str) -> str:
    """Search the docs."""
    return "docs hit"


@function_tool(name_override="search")
def search_crm(phone: str) -> str:
    """Search the contacts."""
    return "contact hit"


def _agent(guard: tg.Guard, tool: FunctionTool, args: dict[str, Any], **kw: Any) -> Any:
    model = ScriptedModel(
        [[function_call(tool.name, args, call_id="s1")], [assistant_message("Done.")]]
    )
    return guard_agent(Agent(name=f"a{id(tool)}", model=model, tools=[tool]), guard, **kw), model


def test_each_agents_legal_call_runs_and_the_developer_is_warned(
    episode: Episode, otel: Telemetry
) -> None:
    guard = otel.guard()
    docs, docs_model = _agent(guard, search, {"query": "refunds"})
    with pytest.warns(UserWarning, match=r"2 different function tools named 'search'"):
        crm, crm_model = _agent(guard, search_crm, {"phone": "+1-555-0199"})

    _, docs_traj = episode(guard, docs, "docs", "docs")
    _, crm_traj = episode(guard, crm, "crm", "crm")

    assert tool_outputs(docs_model, 2)["s1"] == "docs hit"
    assert tool_outputs(crm_model, 2)["s1"] == "contact hit"
    assert [v.valid for v in (*docs_traj.verdicts, *crm_traj.verdicts)] == [True, True]


def test_a_call_matching_neither_tool_is_still_blocked(episode: Episode, otel: Telemetry) -> None:
    guard = otel.guard()
    _agent(guard, search, {"query": "refunds"})
    with pytest.warns(UserWarning):
        crm, model = _agent(guard, search_crm, {"phone": 15550199})

    _, traj = episode(guard, crm, "crm", "crm")

    assert tool_outputs(model, 2)["s1"].startswith("Error: the call to `search`")
    assert [v.check for v in traj.verdicts] == ["schema.args"]


def test_the_other_tools_arguments_are_refused_by_the_sdk(
    episode: Episode, otel: Telemetry
) -> None:
    guard = otel.guard()
    _agent(guard, search, {"query": "refunds"})
    with pytest.warns(UserWarning):
        crm, model = _agent(guard, search_crm, {"query": "refunds"})  # docs' arguments

    _, traj = episode(guard, crm, "crm", "crm")

    assert tool_outputs(model, 2)["s1"] != "contact hit"  # the function did not run
    assert [v.check for v in traj.verdicts] == ["schema.args"]


def test_a_contract_for_the_name_applies_to_both_tools(episode: Episode, otel: Telemetry) -> None:
    guard = otel.guard()
    contracts = {"search": {"grounded": ["phone"]}}
    _agent(guard, search, {"query": "refunds"})
    with pytest.warns(UserWarning):
        crm, _ = _agent(guard, search_crm, {"phone": "+1-555-0100"}, contracts=contracts)

    _, traj = episode(guard, crm, "crm", "crm")  # a phone the user never gave

    assert [v.check for v in traj.verdicts] == ["information.phone"]


def test_the_same_tool_in_two_agents_is_no_warning(otel: Telemetry) -> None:
    guard = otel.guard()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _agent(guard, search, {"query": "a"})
        _agent(guard, search, {"query": "b"})
        _agent(guard, function_tool(search.__wrapped__), {"query": "c"})  # made twice


def test_the_users_own_declaration_of_the_name_holds(episode: Episode, otel: Telemetry) -> None:
    guard = otel.guard()
    guard.declare("search", json_schema=search.params_json_schema)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        crm, model = _agent(guard, search_crm, {"phone": "+1-555-0199"})

    episode(guard, crm, "crm", "crm")

    assert tool_outputs(model, 2)["s1"].startswith("Error: the call to `search`")


class Book(BaseModel):
    title: str


class Flight(BaseModel):
    to: str


def _another_book() -> Any:
    class Book(BaseModel):  # the name of the other tool's model, with other fields
        title: int

    return Book


OtherBook = _another_book()


@function_tool(name_override="reserve")
def reserve_book(item: Book) -> str:
    """Reserve a book."""
    return "book"


@function_tool(name_override="reserve")
def reserve_flight(item: Flight, seats: int) -> str:
    """Reserve a flight."""
    return "flight"


@function_tool(name_override="reserve")
def reserve_other_book(item: OtherBook) -> str:
    """Reserve a book of the other shop."""
    return "other book"


@pytest.mark.parametrize(
    ("other", "args"),
    [
        (reserve_flight, {"item": {"to": "Oslo"}, "seats": 2}),
        (reserve_other_book, {"item": {"title": 7}}),  # one $defs name, two definitions
    ],
    ids=["other-defs", "same-defs-name"],
)
def test_schemas_with_definitions_are_joined(
    episode: Episode, otel: Telemetry, other: FunctionTool, args: dict[str, Any]
) -> None:
    guard = otel.guard()
    books, books_model = _agent(guard, reserve_book, {"item": {"title": "Dune"}})
    with pytest.warns(UserWarning, match="'reserve'"):
        others, others_model = _agent(guard, other, args)

    episode(guard, books, "books", "books")
    episode(guard, others, "others", "others")

    assert tool_outputs(books_model, 2)["s1"] == "book"
    assert tool_outputs(others_model, 2)["s1"] in ("flight", "other book")
