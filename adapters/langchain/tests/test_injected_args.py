"""Arguments LangChain injects are never required by the guard: a legal call is not blocked.

A ``BaseTool`` subclass without ``args_schema`` whose ``_run`` takes a ``RunnableConfig`` is
shown to the model with ``config`` as a *required* argument (LangChain builds its
``tool_call_schema`` from ``_run``'s signature and leaves out only ``run_manager`` and
``callbacks``), and a single-input ``Tool`` has a ``tool_call_schema`` of ``Tool._run``'s
(``args``, a required ``config``) while the model is shown ``__arg1``. Both calls ran in
LangChain and were blocked by the guard. These tests run them on the real framework, with
the model omitting ``config`` and with the model sending one, and every other injected kind
(``InjectedToolCallId``, ``InjectedState``, ``ToolRuntime``, ``run_manager``) for ``@tool``
functions, ``StructuredTool`` s and ``BaseTool`` subclasses with and without ``args_schema``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import pytest
import toolguard as tg
from conftest import Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, Tool, tool
from langgraph.prebuilt import InjectedState, ToolRuntime
from pydantic import BaseModel, ConfigDict

from toolguard_langchain import ToolGuardMiddleware, declare_tool

CONFIG: RunnableConfig = {"metadata": {"tag": "t-7"}}


class RemoveByConfig(BaseTool):
    """The reported shape: no args_schema, ``_run`` asks for the run's config."""

    name: str = "remove_contact"
    description: str = "Remove a contact by its id."

    def _run(
        self,
        contact_id: str,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
    ) -> dict[str, Any]:
        return {"removed": contact_id, "tag": config["metadata"]["tag"]}

    async def _arun(
        self,
        contact_id: str,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
    ) -> dict[str, Any]:
        return {"removed": contact_id, "tag": config["metadata"]["tag"]}


@tool
def search_contacts(phone: str) -> list[dict[str, str]]:
    """Contacts with this phone number."""
    return [{"id": "id_8923", "phone": phone}]


def run(agent: Any, mode: str) -> list[ToolMessage]:
    inputs = {"messages": [("user", "Remove the contact with phone +1-555-0199")]}
    if mode == "async":
        out = asyncio.run(agent.ainvoke(inputs, CONFIG))
    else:
        out = agent.invoke(inputs, CONFIG)
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("sent", [{}, {"config": {}}, {"config": {"tags": ["from-the-model"]}}])
def test_a_config_parameter_shown_as_required_is_not_required(
    sent: dict[str, Any], mode: str, spans: Spans
) -> None:
    remove = RemoveByConfig()
    # LangChain itself shows the model `config` as a required argument (the cause).
    assert "config" in remove.tool_call_schema.model_json_schema()["required"]  # type: ignore[union-attr]
    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, search_contacts, produces={"id": "contact_id"})
    declare_tool(guard, remove, refs={"contact_id": "contact_id"})
    model = scripted(
        turn(call("search_contacts", {"phone": "+1-555-0199"}, "c1")),
        turn(call("remove_contact", {"contact_id": "id_8923", **sent}, "c2")),
        "done",
    )
    agent = create_agent(model, [search_contacts, remove], middleware=[ToolGuardMiddleware(guard)])
    answers = run(agent, mode)
    assert [m.status for m in answers] == ["success", "success"], answers[-1].content
    # LangChain passed the run's own config, whatever the model sent.
    assert json.loads(str(answers[1].content)) == {"removed": "id_8923", "tag": "t-7"}
    assert spans.steps()["c2"] == (2, "remove_contact", "allowed", None)


def test_the_model_arguments_are_still_judged(spans: Spans) -> None:
    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, RemoveByConfig())
    model = scripted(turn(call("remove_contact", {"config": {}}, "c1")), "done")
    agent = create_agent(model, [RemoveByConfig()], middleware=[ToolGuardMiddleware(guard)])
    (answer,) = run(agent, "sync")
    assert answer.status == "error"
    assert "contact_id: missing required argument" in str(answer.content)
    # The hint names what the model must give, not what LangChain fills in.
    assert "remove_contact(contact_id: string)" in str(answer.content)
    assert spans.steps()["c1"] == (1, "remove_contact", "blocked", "schema")


def test_a_single_input_tool_is_judged_by_the_argument_the_model_is_shown(spans: Spans) -> None:
    echo = Tool(name="echo", func=lambda text: text.upper(), description="Echo loudly.")
    guard = tg.Guard(tracer_provider=spans.provider)
    model = scripted(
        turn(call("echo", {"__arg1": "hi"}, "e1")), turn(call("echo", {"__arg1": 3}, "e2")), "done"
    )
    agent = create_agent(model, [echo], middleware=[ToolGuardMiddleware(guard)])
    answers = run(agent, "sync")
    assert (answers[0].status, answers[0].content) == ("success", "HI")
    assert spans.steps()["e1"] == (1, "echo", "allowed", None)
    assert spans.steps()["e2"] == (2, "echo", "blocked", "schema")  # a number is no string


# -- every injected kind, on every way of making a tool -----------------------------------


def _seen(
    contact_id: str,
    config: RunnableConfig,
    call_id: str,
    state: dict[str, Any],
    runtime: ToolRuntime,
) -> dict[str, Any]:
    """What the tool got from LangChain: the proof each argument was injected."""
    return {
        "removed": contact_id,
        "tag": config["metadata"]["tag"],
        "call_id": call_id,
        "runtime_call_id": runtime.tool_call_id,
        "messages": len(state["messages"]),
    }


def remove_contact_fn(
    contact_id: str,
    config: RunnableConfig,
    call_id: Annotated[str, InjectedToolCallId],
    state: Annotated[dict[str, Any], InjectedState],
    runtime: ToolRuntime,
) -> dict[str, Any]:
    """Remove a contact by its id."""
    return _seen(contact_id, config, call_id, state, runtime)


class RemoveArgs(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)  # ToolRuntime is no pydantic type

    contact_id: str
    call_id: Annotated[str, InjectedToolCallId]
    state: Annotated[dict[str, Any], InjectedState]
    runtime: ToolRuntime


class RemoveInjected(BaseTool):
    """A subclass taking every kind in ``_run`` (with or without an ``args_schema``)."""

    name: str = "remove_contact"
    description: str = "Remove a contact by its id."

    def _run(
        self,
        contact_id: str,
        config: RunnableConfig,
        state: Annotated[dict[str, Any], InjectedState],
        runtime: ToolRuntime,
        run_manager: CallbackManagerForToolRun | None = None,
        call_id: Annotated[str, InjectedToolCallId] = "",
    ) -> dict[str, Any]:
        # Without an args_schema LangChain passes no tool call id (it injects one only
        # through the schema): ToolRuntime carries it.
        return _seen(contact_id, config, call_id or str(runtime.tool_call_id), state, runtime)


def injected_tool(kind: str) -> BaseTool:
    if kind == "@tool":
        return tool("remove_contact")(remove_contact_fn)
    if kind == "StructuredTool":
        return StructuredTool.from_function(remove_contact_fn, name="remove_contact")
    if kind == "subclass+args_schema":
        return RemoveInjected(args_schema=RemoveArgs)
    return RemoveInjected()


@pytest.mark.parametrize(
    "kind", ["@tool", "StructuredTool", "subclass+args_schema", "subclass, no args_schema"]
)
def test_every_injected_kind_is_left_to_langchain(kind: str, spans: Spans) -> None:
    remove = injected_tool(kind)
    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, search_contacts, produces={"id": "contact_id"})
    declare_tool(guard, remove, refs={"contact_id": "contact_id"})
    model = scripted(
        turn(call("search_contacts", {"phone": "+1-555-0199"}, "c1")),
        turn(call("remove_contact", {"contact_id": "id_8923"}, "c2")),
        "done",
    )
    agent = create_agent(model, [search_contacts, remove], middleware=[ToolGuardMiddleware(guard)])
    answers = run(agent, "sync")
    assert [m.status for m in answers] == ["success", "success"], answers[-1].content
    got = json.loads(str(answers[1].content))
    assert got == {
        "removed": "id_8923",
        "tag": "t-7",
        "call_id": "c2",
        "runtime_call_id": "c2",
        "messages": 4,  # user, search turn, its answer, this turn
    }
    assert spans.steps()["c2"] == (2, "remove_contact", "allowed", None)
