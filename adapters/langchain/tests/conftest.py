"""Shared pieces: the scripted model LangChain ships for tests, an SDK tracer provider, and
the paper's address book."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import toolguard as tg
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool, tool
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import Field

from toolguard_langchain import declare_tool

PHONE = "+1-555-0199"


class ScriptedModel(GenericFakeChatModel):
    """GenericFakeChatModel answering with the scripted messages in order; keeps what it was
    sent, so a test can see what the model received."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def scripted(*turns: AIMessage | str) -> ScriptedModel:
    return ScriptedModel(messages=iter(turns))


def call(name: str, args: dict[str, Any], id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": id, "type": "tool_call"}


def turn(*calls: dict[str, Any]) -> AIMessage:
    return AIMessage(content="", tool_calls=list(calls))


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def calls(self) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name.startswith("execute_tool ")]

    def summaries(self) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name == "toolguard.trajectory"]

    def steps(self) -> dict[str, Any]:
        """call id -> (step, tool, decision, cause)."""
        out: dict[str, Any] = {}
        for span in self.calls():
            a = span.attributes or {}
            out[str(a.get("gen_ai.tool.call.id"))] = (
                a.get("toolguard.step"),
                a.get("gen_ai.tool.name"),
                a.get("toolguard.decision"),
                a.get("toolguard.cause"),
            )
        return out


@pytest.fixture
def spans() -> Iterator[Spans]:
    s = Spans()
    yield s
    s.provider.shutdown()


@pytest.fixture
def span_file(tmp_path: Path) -> Iterator[tuple[TracerProvider, Path]]:
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    yield provider, path
    provider.shutdown()


class AddressBook:
    """The paper's example: one contact, removable by id only."""

    def __init__(self) -> None:
        self.contacts = {"id_8923": {"id": "id_8923", "name": "Alice", "phone": PHONE}}
        book = self.contacts

        @tool
        def search_contacts(phone: str) -> list[dict[str, str]]:
            """Contacts with this phone number."""
            return [c for c in book.values() if c["phone"] == phone]

        @tool
        def remove_contact(contact_id: str) -> dict[str, str]:
            """Remove a contact by its id."""
            if contact_id not in book:
                return {"error": f"no contact {contact_id}"}
            del book[contact_id]
            return {"removed": contact_id}

        self.search_contacts: BaseTool = search_contacts
        self.remove_contact: BaseTool = remove_contact
        self.tools = [search_contacts, remove_contact]

    def declare(self, guard: tg.Guard) -> None:
        declare_tool(guard, self.search_contacts, produces={"id": "contact_id"})
        declare_tool(
            guard,
            self.remove_contact,
            refs={"contact_id": "contact_id"},
            invalidates={"contact_id": "contact_id"},
        )


@pytest.fixture
def book() -> AddressBook:
    return AddressBook()


PAPER_SCRIPT = (
    turn(call("remove_contact", {"contact_id": PHONE}, "c1")),  # a phone number, not an id
    turn(call("search_contacts", {"phone": PHONE}, "c2")),
    turn(call("remove_contact", {"contact_id": "id_8923"}, "c3")),
    "Alice is removed.",
)
