"""A conversation whose Context is stored and loaded back (``ctx.to_dict()`` /
``Context.from_dict``, as a server keeps a chat between requests): the later run still binds
what the earlier runs' tools returned, as it does with the same Context object."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
import toolguard as tg
from conftest import Telemetry, scripted
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.agent.workflow.base_agent import BaseWorkflowAgent
from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent
from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel
from workflows.context.serializers import JsonPickleSerializer
from workflows.errors import WorkflowCancelledByUser

from toolguard_llama_index import guard_agent

CONTRACTS: dict[str, tg.ToolOptions] = {
    "search_contacts": {"produces": {"id": "contact_id"}},
    "remove_contact": {"refs": {"contact_id": "contact_id"}},
}


class Contact(BaseModel):
    id: str
    phone: str


@dataclass
class Found:
    contacts: list[Contact]


def contacts_agent(removed: list[str], returns: str) -> FunctionAgent:
    def search_contacts(phone: str) -> object:
        """Contacts with this phone number."""
        if returns == "models":  # objects, not JSON: the store keeps their JSON form
            return Found([Contact(id="id_8923", phone=phone)])
        return [{"id": "id_8923", "phone": phone}]

    def remove_contact(contact_id: str) -> dict[str, str]:
        """Remove a contact by id."""
        removed.append(contact_id)
        return {"removed": contact_id}

    model = scripted(
        [("search_contacts", {"phone": "+1-555-0199"})],
        "found it",
        [("remove_contact", {"contact_id": "id_8923"})],
    )
    return FunctionAgent(tools=[search_contacts, remove_contact], llm=model)


def by_start(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return sorted(spans, key=lambda s: s.start_time or 0)


def restored(agent: BaseWorkflowAgent, ctx: Context) -> Context:
    """``ctx`` stored and loaded back, as a server keeps a chat between requests (the pickle
    serializer keeps the memory too; the JSON one leaves it out)."""
    serializer = JsonPickleSerializer()
    return Context.from_dict(agent, ctx.to_dict(serializer=serializer), serializer=serializer)


@pytest.mark.parametrize("first_run", ["ctx", "handler"])
@pytest.mark.parametrize("returns", ["dicts", "models"])
def test_a_restored_context_binds_what_the_earlier_runs_found(
    otel: Telemetry, first_run: str, returns: str
) -> None:
    removed: list[str] = []
    agent = guard_agent(contacts_agent(removed, returns), otel.guard(), contracts=CONTRACTS)

    async def chat() -> None:
        if first_run == "ctx":  # the app made the Context
            ctx = Context(agent)
            await agent.run("Find +1-555-0199", ctx=ctx)
        else:  # the workflow made it: the app keeps the handler's
            handler = agent.run("Find +1-555-0199")
            await handler
            assert handler.ctx is not None
            ctx = handler.ctx
        await agent.run("Now delete that contact", ctx=restored(agent, ctx))

    asyncio.run(chat())
    assert removed == ["id_8923"]
    _, second = sorted(otel.summaries(), key=lambda s: s.start_time or 0)
    assert second.attributes is not None
    assert second.attributes["toolguard.trajectory.first_error_depth"] == 2  # no failure


def test_history_false_binds_nothing_from_a_restored_context(otel: Telemetry) -> None:
    removed: list[str] = []
    agent = guard_agent(
        contacts_agent(removed, "dicts"), otel.guard(), contracts=CONTRACTS, history=False
    )

    async def chat() -> None:
        ctx = Context(agent)
        await agent.run("Find +1-555-0199", ctx=ctx)
        await agent.run("Now delete that contact", ctx=restored(agent, ctx))

    asyncio.run(chat())
    assert removed == []


def test_a_paused_run_restored_from_its_context_is_a_trajectory_of_its_own(
    otel: Telemetry,
) -> None:
    # Human in the loop across requests: the run waiting for the user's answer is stored and
    # cancelled; a later request restores it and sends the answer. The resumed calls were
    # checked outside any trajectory (no step, no dependency check).
    from test_li_pauses import echo, wire, wired

    wired.clear()
    guard = otel.guard()
    model = scripted([("wire", {"amount": 5}), ("echo", {"text": "hi"})], "Wired.")
    agent = guard_agent(FunctionAgent(tools=[wire, echo], llm=model), guard)
    serializer = JsonPickleSerializer()

    async def two_requests() -> None:
        handler = agent.run("wire 5")
        async for event in handler.stream_events():
            if isinstance(event, InputRequiredEvent):
                stored = handler.ctx.to_dict(serializer=serializer)
                await handler.cancel_run()
                break
        with pytest.raises(WorkflowCancelledByUser):
            await handler
        ctx = Context.from_dict(agent, stored, serializer=serializer)
        resumed = agent.run(ctx=ctx)
        answer = HumanResponseEvent.model_validate({"response": "yes"})  # the user's answer
        resumed.ctx.send_event(answer)
        await resumed

    asyncio.run(two_requests())
    assert wired == [5]
    first, second = (dict(s.attributes or {}) for s in by_start(otel.summaries()))
    assert first["toolguard.trajectory.length"] == second["toolguard.trajectory.length"] == 2
    resumed_calls = [
        (s.name, attributes["toolguard.decision"])
        for s in by_start(otel.call_spans())
        if (attributes := dict(s.attributes or {}))["toolguard.trajectory.id"]
        == second["toolguard.trajectory.id"]
    ]
    assert sorted(resumed_calls) == [
        ("execute_tool echo", "allowed"),
        ("execute_tool wire", "allowed"),
    ]
    assert all(
        "toolguard.step" in (s.attributes or {})
        for s in otel.spans()
        if s.name.startswith("execute_tool ")
    )
