"""Fixtures: one real OpenTelemetry SDK provider, the global one (ADK's tracer is global),
its spans kept in memory per test; a scripted model built on ADK's own BaseLlm interface; an
InMemoryRunner driving the agent, sync (Runner.run) or async (Runner.run_async)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
import pytest
import toolguard as tg
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig
from google.adk.apps import App
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

Call = tuple[str, dict[str, Any]]
Turn = Sequence[Call] | str | Callable[[list[types.FunctionResponse]], Sequence[Call] | str]


class Scripted(BaseLlm):
    """A model that answers turn by turn: a list of calls (name, args), a text (which ends
    the invocation), or a function of the tool results the last request carries giving
    either; after the last turn it says "done". Turns count the model's messages in the
    request, so a session's later invocations go on with the script."""

    model: str = "scripted"
    turns: list[Any] = pydantic.Field(default_factory=list)
    ids: bool = False  # give the calls ids of its own (call_0, call_1, ... per turn)
    # When ADK streams (RunConfig(streaming_mode=SSE)): each answer first as a partial
    # response, as a streaming model's chunks are, then whole (ADK runs only the last).
    partial: bool = False

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        index = sum(1 for c in llm_request.contents if c.role == "model")
        last = llm_request.contents[-1] if llm_request.contents else None
        results = (
            [p.function_response for p in (last.parts or []) if p.function_response] if last else []
        )
        turn = self.turns[index] if index < len(self.turns) else "done"
        if callable(turn):
            turn = turn(results)
        if isinstance(turn, str):  # a text answer: the end of an invocation
            parts = [types.Part(text=turn)]
        else:
            calls = turn
            parts = [
                types.Part(
                    function_call=types.FunctionCall(
                        name=name, args=args, id=f"call_{i}" if self.ids else None
                    )
                )
                for i, (name, args) in enumerate(calls)
            ]
        if stream and self.partial:
            chunk = types.Content(role="model", parts=[p.model_copy(deep=True) for p in parts])
            yield LlmResponse(content=chunk, partial=True)
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def scripted(*turns: Turn, ids: bool = False, partial: bool = False) -> Scripted:
    return Scripted(turns=list(turns), ids=ids, partial=partial)


def message(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


@dataclass
class Chat:
    """A runner and one session of it."""

    runner: InMemoryRunner
    session_id: str
    user_id: str = "user"

    def send(self, text: str, mode: str = "async") -> list[Event]:
        if mode == "sync":
            return list(
                self.runner.run(
                    user_id=self.user_id, session_id=self.session_id, new_message=message(text)
                )
            )
        return asyncio.run(self.asend(text))

    async def asend(self, text: str, run_config: RunConfig | None = None) -> list[Event]:
        return await self.asend_content(message(text), run_config)

    async def asend_content(
        self, content: types.Content, run_config: RunConfig | None = None
    ) -> list[Event]:
        """Send a message of any parts (a function response a client sends, say)."""
        return [
            e
            async for e in self.runner.run_async(
                user_id=self.user_id,
                session_id=self.session_id,
                new_message=content,
                run_config=run_config,
            )
        ]


def chat(agent: LlmAgent, plugins: list[Any], app: str = "app") -> Chat:
    runner = InMemoryRunner(app=App(name=app, root_agent=agent, plugins=plugins))
    session = asyncio.run(runner.session_service.create_session(app_name=app, user_id="user"))
    return Chat(runner, session.id)


def answers(events: list[Event]) -> list[types.FunctionResponse]:
    """Every tool answer the model got, in order."""
    return [r for e in events for r in e.get_function_responses()]


class _Extra(SpanProcessor):
    """Hands ended spans to the exporters a test adds (a span file), then forgets them."""

    def __init__(self) -> None:
        self.exporters: list[SpanExporter] = []

    def on_end(self, span: ReadableSpan) -> None:
        for exporter in self.exporters:
            exporter.export([span])


_EXPORTER = InMemorySpanExporter()
_EXTRA = _Extra()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))
_PROVIDER.add_span_processor(_EXTRA)
trace.set_tracer_provider(_PROVIDER)  # ADK's spans go to the global provider only


@dataclass
class Telemetry:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def also(self, exporter: SpanExporter) -> None:
        """Export this test's spans to ``exporter`` too."""
        _EXTRA.exporters.append(exporter)

    def guard(self, **options: Any) -> tg.Guard:
        return tg.Guard(tracer_provider=self.provider, **options)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def tool_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith("execute_tool ")]

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

    def summary(self, trajectory_id: str) -> ReadableSpan:
        found = [
            s
            for s in self.summaries()
            if (s.attributes or {}).get("toolguard.trajectory.id") == trajectory_id
        ]
        assert len(found) == 1, found
        return found[0]


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    _EXPORTER.clear()
    yield Telemetry(_PROVIDER, _EXPORTER)
    for exporter in _EXTRA.exporters:
        exporter.shutdown()
    _EXTRA.exporters.clear()
    _EXPORTER.clear()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)
