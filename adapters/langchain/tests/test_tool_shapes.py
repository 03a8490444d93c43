"""A property over tool shapes: whatever way a tool is made, whatever it returns and whichever
arguments LangChain injects into it, the legal call passes the guard and what it returned
binds the follow-up call.

Each example builds a search tool on the real framework (``@tool``, ``StructuredTool``, a
``BaseTool`` subclass with or without ``args_schema``) taking ``phone`` and a subset of the
injected kinds (a ``RunnableConfig``, ``run_manager``, ``InjectedState``, ``ToolRuntime``,
``InjectedToolCallId``), returning a dict, a pydantic model, a dataclass, a dict holding a
``datetime`` or a list of one of those; the scripted model calls it (sending a value for each
injected argument LangChain shows it, or not) and then removes the contact by the id it
returned. Signatures are made with ``inspect.Signature`` objects, not generated source.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import inspect
from typing import Annotated, Any

import toolguard as tg
from conftest import PHONE, Spans, call, scripted, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForToolRun
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, tool
from langgraph.prebuilt import InjectedState, ToolRuntime
from pydantic import BaseModel, ConfigDict, create_model

from toolguard_langchain import ToolGuardMiddleware, declare_tool


class Contact(BaseModel):
    id: str
    phone: str


@dataclasses.dataclass
class ContactRecord:
    id: str
    phone: str


NEW_YEAR = datetime.datetime(2026, 1, 1)
RETURNS: dict[str, Any] = {
    "dict": lambda phone: {"id": "id_8923", "phone": phone},
    "pydantic": lambda phone: Contact(id="id_8923", phone=phone),
    "dataclass": lambda phone: ContactRecord(id="id_8923", phone=phone),
    "datetime": lambda phone: {"id": "id_8923", "phone": phone, "at": NEW_YEAR},
    "list of pydantic": lambda phone: [Contact(id="id_8923", phone=phone)],
}

# name -> (annotation, default): what each injected kind looks like in a signature.
INJECTED: dict[str, tuple[Any, Any]] = {
    "config": (RunnableConfig, inspect.Parameter.empty),
    "run_manager": (CallbackManagerForToolRun | None, None),
    "state": (Annotated[dict[str, Any], InjectedState], inspect.Parameter.empty),
    "runtime": (ToolRuntime, inspect.Parameter.empty),
    "call_id": (Annotated[str, InjectedToolCallId], ""),
}
KINDS = ("@tool", "StructuredTool", "subclass+args_schema", "subclass, no args_schema")


def _parameters(injected: list[str], with_self: bool) -> list[inspect.Parameter]:
    kw = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("self", kw)] if with_self else []
    params.append(inspect.Parameter("phone", kw, annotation=str))
    # Parameters with defaults last, as Python requires of a real signature.
    ordered = sorted(injected, key=lambda n: INJECTED[n][1] is not inspect.Parameter.empty)
    params += [
        inspect.Parameter(n, kw, annotation=INJECTED[n][0], default=INJECTED[n][1]) for n in ordered
    ]
    return params


def _shaped(params: list[inspect.Parameter], returns: str, got: dict[str, Any]) -> Any:
    """A function with exactly ``params`` (read by LangChain through ``__signature__`` and
    ``__annotations__``) that keeps what it was passed and returns the shaped value."""

    def search_contacts(*args: Any, **kwargs: Any) -> Any:
        got.update(kwargs)
        return RETURNS[returns](kwargs["phone"])

    search_contacts.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    search_contacts.__annotations__ = {p.name: p.annotation for p in params if p.name != "self"}
    search_contacts.__doc__ = "Contacts with this phone number."
    return search_contacts


def shaped_tool(kind: str, injected: list[str], returns: str, got: dict[str, Any]) -> BaseTool:
    if kind in ("@tool", "StructuredTool"):
        fn = _shaped(_parameters(injected, False), returns, got)
        if kind == "@tool":
            return tool("search_contacts")(fn)
        return StructuredTool.from_function(fn, name="search_contacts")
    run = _shaped(_parameters(injected, True), returns, got)
    namespace: dict[str, Any] = {
        "__annotations__": {"name": str, "description": str},
        "__module__": __name__,
        "name": "search_contacts",
        "description": "Contacts with this phone number.",
        "_run": run,
    }
    cls = type("ShapedTool", (BaseTool,), namespace)
    if kind == "subclass, no args_schema":
        return cls()  # type: ignore[no-any-return]
    # A schema lists the arguments and the InjectedToolArg kinds; config and run_manager are
    # passed by _run's signature (a schema requiring config would fail in LangChain itself).
    fields: dict[str, Any] = {"phone": (str, ...)}
    fields |= {
        n: (INJECTED[n][0], INJECTED[n][1]) for n in injected if n not in ("config", "run_manager")
    }
    for name, (annotation, default) in list(fields.items()):
        if default is inspect.Parameter.empty:
            fields[name] = (annotation, ...)
    schema = create_model(
        "SearchArgs", __config__=ConfigDict(arbitrary_types_allowed=True), **fields
    )
    return cls(args_schema=schema)  # type: ignore[no-any-return]


@st.composite
def shapes(draw: st.DrawFn) -> tuple[str, list[str], str, bool, bool]:
    kind = draw(st.sampled_from(KINDS))
    kinds = list(INJECTED)
    if kind == "subclass, no args_schema":
        # LangChain injects a tool call id only through a schema (without one, a required
        # InjectedToolCallId fails in LangChain itself); ToolRuntime carries it there.
        kinds.remove("call_id")
    injected = draw(st.lists(st.sampled_from(kinds), unique=True))
    return (
        kind,
        injected,
        draw(st.sampled_from(list(RETURNS))),
        draw(st.booleans()),
        draw(st.booleans()),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes())
def test_the_legal_call_passes_whatever_the_tool_shape(
    shape: tuple[str, list[str], str, bool, bool],
) -> None:
    kind, injected, returns, send_shown, is_async = shape
    got: dict[str, Any] = {}
    search = shaped_tool(kind, injected, returns, got)
    removed: list[str] = []

    @tool
    def remove_contact(contact_id: str) -> str:
        """Remove a contact by its id."""
        removed.append(contact_id)
        return "removed"

    # The injected arguments LangChain shows the model anyway (a subclass's `config`): the
    # model may well send one.
    schema = search.tool_call_schema
    fields = getattr(schema, "model_fields", {})
    shown = [n for n in injected if n in fields]
    args: dict[str, Any] = {"phone": PHONE} | ({n: {} for n in shown} if send_shown else {})

    spans = Spans()
    guard = tg.Guard(tracer_provider=spans.provider)
    declare_tool(guard, search, produces={"id": "contact_id"})
    declare_tool(guard, remove_contact, refs={"contact_id": "contact_id"})
    model = scripted(
        turn(call("search_contacts", args, "c1")),
        turn(call("remove_contact", {"contact_id": "id_8923"}, "c2")),
        "done",
    )
    agent = create_agent(model, [search, remove_contact], middleware=[ToolGuardMiddleware(guard)])
    inputs: Any = {"messages": [("user", f"Remove the contact with phone {PHONE}")]}
    config: RunnableConfig = {"metadata": {"tag": "t-7"}}
    out = asyncio.run(agent.ainvoke(inputs, config)) if is_async else agent.invoke(inputs, config)
    spans.provider.shutdown()

    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in answers] == ["success", "success"], answers
    assert spans.steps() == {
        "c1": (1, "search_contacts", "allowed", None),
        "c2": (2, "remove_contact", "allowed", None),
    }
    assert removed == ["id_8923"]
    # LangChain filled each injected argument itself: the run's config, not the model's.
    if "config" in injected:
        assert got["config"]["metadata"]["tag"] == "t-7"
    if "runtime" in injected:
        assert got["runtime"].tool_call_id == "c1"
    if "call_id" in injected:
        assert got["call_id"] == "c1"
