"""Runs of a guarded agent under real LangChain instrumentations, in a process of their own
(instrumenting patches LangChain's callback managers for the whole process, and Traceloop's
leaves its context attached after ``uninstrument``: it goes last). Prints, per
instrumentation and mode, what test_instrumentations.py checks, as JSON:
``python instrumented_run.py openinference traceloop``."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import toolguard as tg
from conftest import Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.tools import tool

from toolguard_langchain import ToolGuardMiddleware


def instrumentor(which: str) -> Any:
    if which == "traceloop":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        return LangchainInstrumentor()
    from openinference.instrumentation.langchain import LangChainInstrumentor

    return LangChainInstrumentor()


@tool
def ping(n: int) -> str:
    """Ping."""
    return "pong"


def one_run(which: str, mode: str) -> dict[str, Any]:
    spans = Spans()
    instrumented = instrumentor(which)
    instrumented.instrument(tracer_provider=spans.provider)
    try:
        guard = tg.Guard(tracer_provider=spans.provider)
        model = scripted(turn(call("ping", {"n": 1}, "p1"), call("ping", {"n": 2}, "p2")), "done")
        agent = create_agent(model, [ping], middleware=[ToolGuardMiddleware(guard)])
        inputs = {"messages": [("user", "ping twice")]}
        if mode == "async":
            asyncio.run(agent.ainvoke(inputs))
        else:
            agent.invoke(inputs)
    finally:
        instrumented.uninstrument()
    finished = spans.finished()
    ours = [s for s in finished if "toolguard.trajectory.id" in (s.attributes or {})]
    return {
        "traces": len({s.context.trace_id for s in finished}),
        "ours": len(ours),
        "theirs": len(finished) - len(ours),
        "steps": sorted(
            int(str((s.attributes or {})["toolguard.step"]))
            for s in ours
            if s.name.startswith("execute_tool")
        ),
    }


if __name__ == "__main__":
    runs = {f"{w} {m}": one_run(w, m) for w in sys.argv[1:] for m in ("sync", "async")}
    print(json.dumps(runs))
