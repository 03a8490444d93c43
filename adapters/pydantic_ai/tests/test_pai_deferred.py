"""Deferred tool calls: each one the model emitted takes one step with one verdict and span.

A call of a tool that requires approval takes its step in the run that resumes it: checked as
it runs when approved, ``cancelled`` (``blocked`` where the guard would block it) when
denied. A call of an external tool (``ExternalToolset``) is checked when the model emits it:
one the guard blocks is answered with the guard's message and never reaches the app; one it
allows leaves the run for the app and ends ``cancelled`` there (its result, given to a later
run, takes no second step)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import toolguard as tg
from conftest import Telemetry, returns, scripted
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
    Tool,
    ToolDenied,
)
from pydantic_ai.messages import ModelRequest, TextPart, ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

from toolguard_pydantic_ai import ToolGuard

SEARCH: dict[str, Any] = {"search": {"produces": {"id": "contact_id"}}}


def search(phone: str) -> list[dict[str, str]]:
    """Contacts with this phone number."""
    return [{"id": "id_1", "phone": phone}]


def calls(otel: Telemetry) -> dict[str, list[tuple[Any, Any, Any]]]:
    """(call id, step, decision) of each call span, by trajectory."""
    out: dict[str, list[tuple[Any, Any, Any]]] = {}
    for span in otel.call_spans():
        a = span.attributes or {}
        out.setdefault(str(a["toolguard.trajectory.id"]), []).append(
            (a.get("gen_ai.tool.call.id"), a["toolguard.step"], a["toolguard.decision"])
        )
    return {k: sorted(v) for k, v in out.items()}


def lengths(otel: Telemetry) -> dict[Any, Any]:
    return {
        (s.attributes or {})["toolguard.trajectory.id"]: (s.attributes or {})[
            "toolguard.trajectory.length"
        ]
        for s in otel.spans()
        if s.name == "toolguard.trajectory"
    }


def named(*ids: str) -> Any:
    names: Iterator[str] = iter(ids)
    return lambda ctx: next(names)


def approval_agent(
    otel: Telemetry, *turn: ToolCallPart, ids: Any = None
) -> tuple[Agent[None, Any], tg.Guard]:
    removed: list[str] = []

    def remove(contact_id: str) -> str:
        """Remove a contact by its id."""
        removed.append(contact_id)
        return "removed"

    model = scripted([ToolCallPart("search", {"phone": "1"}, tool_call_id="c1")], list(turn))
    guard = otel.guard()
    contracts = {**SEARCH, "remove": {"refs": {"contact_id": "contact_id"}}}
    agent = Agent(
        model,
        output_type=[str, DeferredToolRequests],
        tools=[search, Tool(remove, requires_approval=True)],
        capabilities=[ToolGuard(guard, contracts=contracts, trajectory_id=ids)],
    )
    return agent, guard


def test_a_denied_call_takes_its_step_cancelled_in_the_resumed_run(otel: Telemetry) -> None:
    agent, _ = approval_agent(
        otel,
        ToolCallPart("remove", {"contact_id": "id_1"}, tool_call_id="c2"),
        ids=named("asked", "resumed"),
    )
    first = agent.run_sync("remove 1")
    assert isinstance(first.output, DeferredToolRequests)
    second = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c2": ToolDenied("no")}),
    )

    assert second.output == "done"
    assert calls(otel) == {"asked": [("c1", 1, "allowed")], "resumed": [("c2", 1, "cancelled")]}
    assert lengths(otel) == {"asked": 1, "resumed": 1}


def test_a_denied_call_in_one_trajectory_of_both_runs(otel: Telemetry) -> None:
    agent, guard = approval_agent(
        otel, ToolCallPart("remove", {"contact_id": "id_1"}, tool_call_id="c2")
    )
    with guard.trajectory("chat") as traj:
        first = agent.run_sync("remove 1")
        agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"c2": False}),
        )

    assert traj.length == 2 and traj.first_error_depth == 3
    assert calls(otel) == {"chat": [("c1", 1, "allowed"), ("c2", 2, "cancelled")]}


def test_a_denied_call_the_guard_would_block_ends_blocked(otel: Telemetry) -> None:
    agent, _ = approval_agent(
        otel,
        ToolCallPart("remove", {"contact_id": "id_unseen"}, tool_call_id="c2"),
        ids=named("asked", "resumed"),
    )
    first = agent.run_sync("remove 1")
    agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c2": False}),
    )

    assert calls(otel)["resumed"] == [("c2", 1, "blocked")]
    [blocked] = [
        s for s in otel.call_spans() if (s.attributes or {})["gen_ai.tool.call.id"] == "c2"
    ]
    assert (blocked.attributes or {})["toolguard.cause"] == "dependency"  # not an unknown tool


def test_denied_and_approved_calls_of_one_turn_keep_emission_order(otel: Telemetry) -> None:
    agent, _ = approval_agent(
        otel,
        ToolCallPart("remove", {"contact_id": "id_1"}, tool_call_id="c2"),
        ToolCallPart("remove", {"contact_id": "id_1"}, tool_call_id="c3"),
        ids=named("asked", "resumed"),
    )
    first = agent.run_sync("remove 1")
    agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c2": False, "c3": True}),
    )

    assert calls(otel)["resumed"] == [("c2", 1, "cancelled"), ("c3", 2, "allowed")]
    assert lengths(otel)["resumed"] == 2


def external_agent(
    otel: Telemetry, contact_id: str, ids: Any = None, rejection: Any = "failed"
) -> tuple[Agent[None, Any], tg.Guard]:
    notify = ToolDefinition(
        name="notify",
        parameters_json_schema={
            "type": "object",
            "properties": {"contact_id": {"type": "string"}},
            "required": ["contact_id"],
        },
    )

    def after_notify(request: ModelRequest) -> list[Any]:
        answer = returns(request).get("n1")
        if answer is None:
            return [TextPart("notify said nothing")]
        return [TextPart(f"notify said ({answer.outcome}): {answer.content}")]

    contracts = {**SEARCH, "notify": {"refs": {"contact_id": "contact_id"}}}
    model = scripted(
        [ToolCallPart("search", {"phone": "1"}, tool_call_id="c1")],
        [ToolCallPart("notify", {"contact_id": contact_id}, tool_call_id="n1")],
        after_notify,
    )
    guard = otel.guard()
    agent = Agent(
        model,
        output_type=[str, DeferredToolRequests],
        tools=[search],
        toolsets=[ExternalToolset([notify])],
        capabilities=[
            ToolGuard(guard, contracts=contracts, trajectory_id=ids, rejection=rejection)
        ],
    )
    return agent, guard


def test_an_external_call_is_checked_when_emitted_and_ends_cancelled(otel: Telemetry) -> None:
    agent, _ = external_agent(otel, "id_1", ids=named("asked", "answered"))
    first = agent.run_sync("notify 1")
    assert isinstance(first.output, DeferredToolRequests)
    assert [c.tool_call_id for c in first.output.calls] == ["n1"]
    second = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(calls={"n1": "sent"}),
    )

    assert second.output == "notify said (success): sent"
    assert calls(otel) == {"asked": [("c1", 1, "allowed"), ("n1", 2, "cancelled")]}
    assert lengths(otel) == {"asked": 2, "answered": 0}


def test_an_external_call_the_guard_blocks_never_reaches_the_app(otel: Telemetry) -> None:
    agent, _ = external_agent(otel, "id_unseen", ids=named("asked"))
    result = agent.run_sync("notify 1")

    assert isinstance(result.output, str) and "rejected" in result.output
    assert "dependency" in result.output
    assert calls(otel) == {"asked": [("c1", 1, "allowed"), ("n1", 2, "blocked")]}


def test_an_external_result_in_a_later_run_of_one_trajectory_takes_no_step(
    otel: Telemetry,
) -> None:
    agent, guard = external_agent(otel, "id_1")
    with guard.trajectory("chat") as traj:
        first = agent.run_sync("notify 1")
        second = agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(calls={"n1": "sent"}),
        )

    assert second.output == "notify said (success): sent"
    assert traj.length == 2
    assert calls(otel) == {"chat": [("c1", 1, "allowed"), ("n1", 2, "cancelled")]}


@pytest.mark.parametrize(("rejection", "outcome"), [("failed", "failed"), ("return", "success")])
def test_a_blocked_external_call_is_answered_as_the_rejection_option_says(
    otel: Telemetry, rejection: Any, outcome: str
) -> None:
    agent, _ = external_agent(otel, "id_unseen", ids=named("asked"), rejection=rejection)
    result = agent.run_sync("notify 1")

    assert result.output.startswith(f"notify said ({outcome}): Error: the call to `notify`")


def asks(ctx: RunContext[None], text: str) -> str:
    """Asks a human first."""
    if not ctx.tool_call_approved:
        raise ApprovalRequired()
    return text


def test_a_call_that_asked_by_raising_and_was_denied_takes_one_step(otel: Telemetry) -> None:
    # It took its step where it raised (cancelled there): the denial adds none.
    guard = otel.guard()
    model = scripted([ToolCallPart("asks", {"text": "a"}, tool_call_id="c1")])
    agent = Agent(
        model,
        output_type=[str, DeferredToolRequests],
        tools=[asks],
        capabilities=[ToolGuard(guard)],
    )
    with guard.trajectory("chat") as traj:
        first = agent.run_sync("go")
        assert isinstance(first.output, DeferredToolRequests)
        agent.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"c1": False}),
        )

    assert traj.length == 1
    assert calls(otel) == {"chat": [("c1", 1, "cancelled")]}


def test_a_call_that_asked_by_raising_is_denied_in_a_new_trajectory_there(
    otel: Telemetry,
) -> None:
    guard = otel.guard()
    model = scripted([ToolCallPart("asks", {"text": "a"}, tool_call_id="c1")])
    agent = Agent(
        model,
        output_type=[str, DeferredToolRequests],
        tools=[asks],
        capabilities=[ToolGuard(guard, trajectory_id=named("asked", "denied"))],
    )
    first = agent.run_sync("go")
    agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c1": False}),
    )

    assert calls(otel) == {"asked": [("c1", 1, "cancelled")], "denied": [("c1", 1, "cancelled")]}


def test_a_denied_call_of_a_tool_without_a_contract_is_known_to_the_guard(
    otel: Telemetry,
) -> None:
    # The resumed run's tools are prepared inside its turn: the tool is declared from them,
    # not refused as unknown (schema.tool).
    def remove(text: str) -> str:
        """Remove."""
        return text

    parts = [ToolCallPart("remove", {"text": t}, tool_call_id=t) for t in ("a", "b")]
    agent = Agent(
        scripted(parts),
        output_type=[str, DeferredToolRequests],
        tools=[Tool(remove, requires_approval=True)],
        capabilities=[ToolGuard(otel.guard(), trajectory_id=named("asked", "denied"))],
    )
    first = agent.run_sync("go")
    agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"a": False, "b": ToolDenied()}),
    )

    assert calls(otel) == {"denied": [("a", 1, "cancelled"), ("b", 2, "cancelled")]}


def test_an_external_tool_without_a_contract_is_known_to_the_guard(otel: Telemetry) -> None:
    ext = ToolDefinition(
        name="ext", parameters_json_schema={"type": "object", "properties": {"q": {}}}
    )
    agent = Agent(
        scripted([ToolCallPart("ext", {"q": "a"}, tool_call_id="e1")]),
        output_type=[str, DeferredToolRequests],
        toolsets=[ExternalToolset([ext])],
        capabilities=[ToolGuard(otel.guard(), trajectory_id=named("asked"))],
    )
    result = agent.run_sync("go")

    assert isinstance(result.output, DeferredToolRequests)
    assert calls(otel) == {"asked": [("e1", 1, "cancelled")]}
