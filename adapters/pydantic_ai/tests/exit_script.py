"""Run by test_pai_trajectories: the process leaves while a run is in a tool, so ``wrap_run``
never returns (the run's loop is in a daemon thread, frozen at exit); the trajectory the
capability opened must still write its summary, at interpreter exit."""

from __future__ import annotations

import asyncio
import threading

import toolguard as tg
from conftest import scripted
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.messages import ToolCallPart

from toolguard_pydantic_ai import ToolGuard


def line(span: ReadableSpan) -> str:
    return f"{span.name} {dict(span.attributes or {})}\n"


started = threading.Event()


async def hang(text: str) -> str:
    """Never returns."""
    started.set()
    await asyncio.Event().wait()
    return text


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=line)))
capability = ToolGuard(
    tg.Guard(tracer_provider=provider),
    trajectory_id=lambda ctx: "left-open",
    labels={"model": "m"},
    success=lambda result: True,
)
model = scripted([ToolCallPart("hang", {"text": "a"}, tool_call_id="h1")])
agent = Agent(model, tools=[hang], capabilities=[capability])
threading.Thread(target=lambda: asyncio.run(agent.run("go")), daemon=True).start()
started.wait()
print("exiting mid-run", flush=True)
