"""Fixtures: a real OpenTelemetry SDK provider (never the global one), Pydantic AI's own
instrumentation on that provider, and scripted models built on Pydantic AI's FunctionModel."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import toolguard as tg
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import InstrumentationSettings
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

Turn = Sequence[ModelResponsePart] | Callable[[ModelRequest], Sequence[ModelResponsePart]]


def scripted(*turns: Turn) -> FunctionModel:
    """A model that answers turn by turn: a list of parts, or a function of the last request
    (the tool results it carries); after the last turn it says "done"."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        index = sum(isinstance(m, ModelResponse) for m in messages)
        turn = turns[index] if index < len(turns) else [TextPart("done")]
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        return ModelResponse(parts=list(turn(last) if callable(turn) else turn))

    return FunctionModel(respond)


def returns(request: ModelRequest) -> dict[str, ToolReturnPart]:
    """The tool returns a request carries, by call id."""
    return {p.tool_call_id: p for p in request.parts if isinstance(p, ToolReturnPart)}


@dataclass
class Telemetry:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def guard(self, **options: Any) -> tg.Guard:
        return tg.Guard(tracer_provider=self.provider, **options)

    def instrumentation(self) -> Instrumentation:
        """Pydantic AI's instrumentation on the same provider as the guard."""
        return Instrumentation(settings=InstrumentationSettings(tracer_provider=self.provider))

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def tool_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith("execute_tool ")]

    def call_spans(self) -> list[ReadableSpan]:
        """Spans a reader counts as call spans (protocol section 5: by attributes)."""
        return [
            s
            for s in self.spans()
            if "toolguard.trajectory.id" in (s.attributes or {})
            and "toolguard.step" in (s.attributes or {})
        ]

    def summary(self, trajectory_id: str) -> ReadableSpan:
        found = [
            s
            for s in self.spans()
            if s.name == "toolguard.trajectory"
            and (s.attributes or {}).get("toolguard.trajectory.id") == trajectory_id
        ]
        assert len(found) == 1, found
        return found[0]


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Telemetry(provider, exporter)
    provider.shutdown()
