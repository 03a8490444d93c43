"""Run by test_adk_trajectories: an invocation cancelled, its runner never closed, when the
interpreter exits."""

from __future__ import annotations

import asyncio
import contextlib

import toolguard as tg
from conftest import Chat, scripted
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from toolguard_google_adk import ToolGuardPlugin


def line(span: ReadableSpan) -> str:
    return f"{span.name} {dict(span.attributes or {})}\n"


async def hang(text: str) -> dict[str, str]:
    """Never returns."""
    started.set()
    await asyncio.Event().wait()
    return {"text": text}


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=line)))
plugin = ToolGuardPlugin(tg.Guard(tracer_provider=provider), trajectory_id=lambda ctx: "left-open")
agent = LlmAgent(name="a", model=scripted([("hang", {"text": "a"})]), tools=[hang])
runner = InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[plugin]))
started = asyncio.Event()


async def main() -> None:
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    task = asyncio.ensure_future(Chat(runner, session.id, "u").asend("go"))
    await started.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


asyncio.run(main())
