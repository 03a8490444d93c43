"""Fixtures: a real OpenTelemetry SDK provider (never the global one), and a scripted model
built on LlamaIndex's own MockFunctionCallingLLM (llama_index.core.llms.mock)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import toolguard as tg
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

Call = tuple[str, dict[str, Any]]
Turn = Sequence[Call] | Callable[[list[ChatMessage]], Sequence[Call]] | str


def scripted(*turns: Turn) -> MockFunctionCallingLLM:
    """A model that answers turn by turn: a list of calls (name, kwargs), a function of the
    tool messages the last turn got back, or a text (which ends the run); after the last turn
    it says "done". Turns count the assistant messages in the request, so a conversation's
    later runs go on with the script. Call ids: t<turn>-<index>."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        index = sum(1 for m in messages if m.role == MessageRole.ASSISTANT)
        turn = turns[index] if index < len(turns) else "done"
        if isinstance(turn, str):
            return ChatMessage(role="assistant", content=turn)
        tail: list[ChatMessage] = []
        for message in reversed(messages):
            if message.role != MessageRole.TOOL:
                break
            tail.insert(0, message)
        calls = turn(tail) if callable(turn) else turn
        blocks = [
            ToolCallBlock(tool_call_id=f"t{index}-{i}", tool_name=name, tool_kwargs=kwargs)
            for i, (name, kwargs) in enumerate(calls)
        ]
        return ChatMessage(role="assistant", blocks=blocks)

    return MockFunctionCallingLLM(response_generator=respond)


def run(agent: Any, *args: Any, **kwargs: Any) -> Any:
    """One ``agent.run(...)`` to its end, as an application awaits it."""

    async def go() -> Any:
        return await agent.run(*args, **kwargs)

    return asyncio.run(go())


@dataclass
class Telemetry:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def guard(self, **options: Any) -> tg.Guard:
        return tg.Guard(tracer_provider=self.provider, **options)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def call_spans(self) -> list[ReadableSpan]:
        """Spans a reader counts as call spans (protocol section 4: by attributes)."""
        return [
            s
            for s in self.spans()
            if "toolguard.trajectory.id" in (s.attributes or {})
            and "toolguard.step" in (s.attributes or {})
        ]

    def summaries(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == "toolguard.trajectory"]


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Telemetry(provider, exporter)
    provider.shutdown()
