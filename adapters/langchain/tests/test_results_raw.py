"""Defect 1 of issue 23: a tool returning objects LangChain cannot ``json.dumps`` (pydantic
models, dataclasses, a ``datetime`` inside a dict) keeps its ``produces`` bindings. LangChain
puts ``str(value)`` in the ToolMessage; the guard reads the tool's raw return value instead,
for ``@tool`` functions, ``StructuredTool``s and ``BaseTool`` subclasses, sync and async."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
from typing import Any

import pytest
import toolguard as tg
from conftest import PHONE, Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, tool
from pydantic import BaseModel

from toolguard_langchain import ToolGuardMiddleware, declare_tool


class Contact(BaseModel):
    id: str
    phone: str


@dataclasses.dataclass
class ContactRecord:
    id: str
    phone: str


def _pydantic(phone: str) -> list[Contact]:
    return [Contact(id="id_8923", phone=phone)]


def _dataclass(phone: str) -> list[ContactRecord]:
    return [ContactRecord(id="id_8923", phone=phone)]


def _datetime(phone: str) -> dict[str, Any]:
    return {"id": "id_8923", "phone": phone, "added": datetime.datetime(2026, 1, 1)}


class SearchArgs(BaseModel):
    phone: str


class SearchTool(BaseTool):
    """A BaseTool subclass: its own _run / _arun, no func."""

    name: str = "search_contacts"
    description: str = "Contacts with this phone number."
    args_schema: type[BaseModel] = SearchArgs

    def _run(self, phone: str, **kwargs: Any) -> list[Contact]:
        return _pydantic(phone)

    async def _arun(self, phone: str, **kwargs: Any) -> list[Contact]:
        return _pydantic(phone)


def search_tool(kind: str) -> BaseTool:
    if kind == "subclass":
        return SearchTool()
    fn = {"pydantic": _pydantic, "dataclass": _dataclass, "datetime": _datetime}[kind]
    if kind == "datetime":
        return StructuredTool.from_function(
            fn, name="search_contacts", description="Contacts with this phone number."
        )
    fn.__doc__ = "Contacts with this phone number."
    return tool("search_contacts")(fn)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["pydantic", "dataclass", "datetime", "subclass"])
def test_produces_read_from_the_raw_result(kind: str, mode: str, spans: Spans) -> None:
    removed: list[str] = []

    @tool
    def remove_contact(contact_id: str) -> str:
        """Remove a contact by its id."""
        removed.append(contact_id)
        return "removed"

    search = search_tool(kind)
    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, search, produces={"id": "contact_id"})
    declare_tool(guard, remove_contact, refs={"contact_id": "contact_id"})
    model = scripted(
        turn(call("search_contacts", {"phone": PHONE}, "c1")),
        turn(call("remove_contact", {"contact_id": "id_8923"}, "c2")),
        "done",
    )
    agent = create_agent(model, [search, remove_contact], middleware=[ToolGuardMiddleware(guard)])
    inputs = {"messages": [("user", f"Remove the contact with phone {PHONE}")]}
    out = asyncio.run(agent.ainvoke(inputs)) if mode == "async" else agent.invoke(inputs)

    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in answers] == ["success", "success"], answers[1].content
    assert removed == ["id_8923"]
    assert spans.steps()["c2"] == (2, "remove_contact", "allowed", None)
    # The model still gets LangChain's own text of the result.
    assert "id_8923" in str(answers[0].content)


class CountingTool(BaseTool):
    """Keeps state on itself, reassigned by each run."""

    name: str = "count"
    description: str = "Count."
    calls: int = 0

    def _run(self, **kwargs: Any) -> dict[str, int]:
        self.calls += 1
        return {"calls": self.calls}


def test_a_tool_keeps_its_state_on_the_object_the_user_holds(spans: Spans) -> None:
    counting = CountingTool()
    guard = tg.Guard(tracer_provider=spans.provider)
    model = scripted(turn(call("count", {}, "n1")), turn(call("count", {}, "n2")), "done")
    agent = create_agent(model, [counting], middleware=[ToolGuardMiddleware(guard)])
    agent.invoke({"messages": [("user", "count twice")]})
    assert counting.calls == 2


class ConfiguredTool(BaseTool):
    """Asks LangChain for its run manager and the run's config: LangChain reads the running
    copy's signature and type hints to pass them (the copy answers both as the tool would)."""

    name: str = "configured"
    description: str = "Report what LangChain passed."
    # No args_schema: LangChain's tool_call_schema lists `config` as a required argument,
    # which the guard leaves to LangChain (tests/test_injected_args.py).

    def _run(
        self,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        return {"run_manager": type(run_manager).__name__, "tag": config["metadata"]["tag"]}

    async def _arun(
        self,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        return {"run_manager": type(run_manager).__name__, "tag": config["metadata"]["tag"]}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_running_copy_gets_run_manager_and_config(mode: str, spans: Spans) -> None:
    configured = ConfiguredTool()
    guard = tg.Guard(tracer_provider=spans.provider)
    model = scripted(turn(call("configured", {}, "k1")), "done")
    agent = create_agent(model, [configured], middleware=[ToolGuardMiddleware(guard)])
    inputs = {"messages": [("user", "go")]}
    config: RunnableConfig = {"metadata": {"tag": "t-7"}}
    run = agent.ainvoke(inputs, config) if mode == "async" else None
    out = asyncio.run(run) if run is not None else agent.invoke(inputs, config)
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    manager = "AsyncCallbackManagerForToolRun" if mode == "async" else "CallbackManagerForToolRun"
    assert json.loads(answer.content) == {"run_manager": manager, "tag": "t-7"}
    assert spans.steps()["k1"] == (1, "configured", "allowed", None)
