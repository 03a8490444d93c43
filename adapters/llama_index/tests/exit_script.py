"""Run by test_li_trajectories: the process leaves while a run is in a tool, so the run's
handler never completes (its loop is in a daemon thread, frozen at exit); the trajectory
the guarded agent opened must still write its summary, at interpreter exit."""

from __future__ import annotations

import asyncio
import threading

import toolguard as tg
from conftest import run, scripted
from llama_index.core.agent.workflow import FunctionAgent
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from toolguard_llama_index import guard_agent


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
agent = guard_agent(
    FunctionAgent(tools=[hang], llm=scripted([("hang", {"text": "a"})])),
    tg.Guard(tracer_provider=provider),
    trajectory_id=lambda: "left-open",
    labels={"model": "m"},
    success=lambda result: True,
)
threading.Thread(target=lambda: run(agent, "go"), daemon=True).start()
started.wait()
print("exiting mid-run", flush=True)
