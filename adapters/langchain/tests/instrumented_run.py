"""Runs of a guarded agent under real LangChain instrumentations, in a process of their own
(instrumenting patches LangChain's callback managers for the whole process, Traceloop's
leaves its context attached after ``uninstrument`` and LangSmith's OTel mode is chosen by
environment variables and the global tracer provider). Prints, per instrumentation and mode,
what test_instrumentations.py checks, as JSON:

    python instrumented_run.py OUT_DIR none openinference traceloop
    python instrumented_run.py OUT_DIR langsmith [legacy]

The run: two parallel calls of ``ping`` (executed), a call of ``fetch`` whose token no call
produced (blocked: dependency), a call of ``boom`` (executed; it fails, answered with an error
message: state_consistency), then the answer; each of the four model turns reports 10 input
and 3 output tokens, as a provider would. ``none`` is the same run without an instrumentation:
the figures every instrumented run must repeat.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import toolguard as tg
from conftest import call, turn
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.tools import ToolException, tool
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolguard_langchain import ToolCallGuard, ToolGuardMiddleware, declare_tool


class ListModel(FakeMessagesListChatModel):
    """LangChain's fake chat model answering with its list in order. (Not the generator-fed
    GenericFakeChatModel: LangSmith's tracer serialises the model, which would drain it.)"""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ListModel:
        return self


@tool
def ping(n: int) -> str:
    """Ping."""
    return "pong"


@tool
def fetch(token: str) -> str:
    """Fetch by a token some call produced."""
    return "data"


@tool
def boom() -> str:
    """Fail, as the environment does."""
    raise ToolException("out of order")


boom.handle_tool_error = True  # answered with an error message


def model() -> ListModel:
    turns: list[BaseMessage] = [
        turn(call("ping", {"n": 1}, "p1"), call("ping", {"n": 2}, "p2")),
        turn(call("fetch", {"token": "made-up"}, "f1")),
        turn(call("boom", {}, "b1")),
        AIMessage(content="done"),
    ]
    for message in turns:
        assert isinstance(message, AIMessage)
        message.usage_metadata = UsageMetadata(input_tokens=10, output_tokens=3, total_tokens=13)
    return ListModel(responses=turns)


def instrumentor(which: str) -> Any:
    if which == "traceloop":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        return LangchainInstrumentor()
    if which == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        return LangChainInstrumentor()
    return None


def agent_run(guard: tg.Guard, mode: str, *, how: str = "own") -> None:
    """``own``: the middleware's own trajectory; ``around``: the caller's, current where the
    agent is invoked; ``given``: ``ToolCallGuard(trajectory=...)``, opened but not current."""
    declare_tool(guard, fetch, refs={"token": "token"})
    given = guard.trajectory("given") if how == "given" else None
    middleware: Any = (
        ToolGuardMiddleware(guard) if given is None else ToolCallGuard(guard, trajectory=given)
    )
    agent = create_agent(model(), [ping, fetch, boom], middleware=[middleware])
    inputs = {"messages": [("user", "ping twice, then fetch")]}
    if how == "around":
        with guard.trajectory("around"):
            _invoke(agent, inputs, mode)
    elif given is not None:
        given.start()
        _invoke(agent, inputs, mode)
        given.end()
    else:
        _invoke(agent, inputs, mode)


def _invoke(agent: Any, inputs: Any, mode: str) -> None:
    if mode == "async":
        asyncio.run(agent.ainvoke(inputs))
    else:
        agent.invoke(inputs)


def summary(finished: list[ReadableSpan], path: Path) -> dict[str, Any]:
    """What the test checks: the traces, every tool span (ours or theirs) and the report."""
    from toolguard.report.build import build_report
    from toolguard.report.read import read_records

    tool_spans = []
    for s in finished:
        a = dict(s.attributes or {})
        if (
            s.name.startswith("execute_tool ")
            or a.get("gen_ai.operation.name") == "execute_tool"
            or a.get("openinference.span.kind") == "TOOL"
        ):
            tool_spans.append(
                {
                    "name": s.name,
                    "scope": s.instrumentation_scope.name if s.instrumentation_scope else None,
                    "step": a.get("toolguard.step"),
                    "decision": a.get("toolguard.decision"),
                    "cause": a.get("toolguard.cause"),
                    "call_id": a.get("gen_ai.tool.call.id"),
                    "ns": (s.end_time or 0) - (s.start_time or 0),
                }
            )
    joined = "langsmith.metadata.toolguard.trajectory.id"  # docs/protocol.md section 6.8
    records, _ = read_records([str(path)], cost=True)
    report = build_report(records, cost=True)["overall"]
    return {
        "traces": len({s.context.trace_id for s in finished}),
        "trajectory_ids": sorted(r.trajectory_id for r in records),
        # The trajectories other tracers' spans name, per trace
        "joined": sorted(
            {
                (f"{s.context.trace_id:032x}", str((s.attributes or {})[joined]))
                for s in finished
                if joined in (s.attributes or {})
            }
        ),
        "guard_traces": sorted(
            {
                f"{s.context.trace_id:032x}"
                for s in finished
                if s.instrumentation_scope and s.instrumentation_scope.name == "toolguard"
            }
        ),
        "tool_spans": tool_spans,
        "trajectories": sorted((r.length, r.fed) for r in records),
        "ter": report["ter"],
        "mean_fed": report["mean_fed"],
        "cost": report["cost"],
    }


class Recorder:
    """One tracer provider for the whole process, its spans kept in memory and written to a
    file per run. One: an instrumentation instrumented again keeps the provider it was first
    given (Traceloop's callback handler does), and LangSmith's takes the global one."""

    def __init__(self) -> None:
        self.memory, self.to_file = InMemorySpanExporter(), _Switch()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.provider.add_span_processor(SimpleSpanProcessor(self.to_file))

    def start(self, path: Path) -> None:
        self.memory.clear()
        self.to_file.to(path)

    def summary(self, path: Path) -> dict[str, Any]:
        self.provider.force_flush()
        return summary(list(self.memory.get_finished_spans()), path)


def one_run(which: str, mode: str, out: Path, recorder: Recorder) -> dict[str, Any]:
    path = out / f"{which}-{mode}.jsonl"
    recorder.start(path)
    instrumented = instrumentor(which)
    if instrumented is not None:
        instrumented.instrument(tracer_provider=recorder.provider)
    try:
        agent_run(tg.Guard(tracer_provider=recorder.provider), mode)
    finally:
        if instrumented is not None:
            instrumented.uninstrument()
    return recorder.summary(path)


class _Switch(SpanExporter):
    """A span file per run, from one provider (the global one cannot be replaced)."""

    def __init__(self) -> None:
        self.file: FileSpanExporter | None = None

    def to(self, path: Path) -> Path:
        if self.file is not None:
            self.file.shutdown()
        self.file = FileSpanExporter(str(path))
        return path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        assert self.file is not None
        return self.file.export(spans)


def langsmith_runs(out: Path, *, legacy: bool = False) -> dict[str, Any]:
    """LangSmith's OTel mode: its tracer turns the runs into OTel spans on the global tracer
    provider (set before its client is made: else it installs an OTLP exporter of its own),
    in a background thread, with nothing sent anywhere else (``otel`` mode; ``legacy``: the
    older spelling ``LANGSMITH_OTEL_ENABLED`` + ``LANGSMITH_OTEL_ONLY``, the own run only)."""
    if legacy:
        os.environ.update(
            LANGSMITH_TRACING="true", LANGSMITH_OTEL_ENABLED="true", LANGSMITH_OTEL_ONLY="true"
        )
    else:
        os.environ.update(LANGSMITH_TRACING="true", LANGSMITH_TRACING_MODE="otel")
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from opentelemetry import trace

    recorder = Recorder()
    trace.set_tracer_provider(recorder.provider)  # LangSmith's exporter takes the global one
    runs = {}
    for how in ("own",) if legacy else ("own", "around", "given"):
        for mode in ("sync",) if legacy else ("sync", "async"):
            name = f"langsmith {mode}{'' if how == 'own' else ' ' + how}"
            path = out / f"{name.replace(' ', '-')}.jsonl"
            recorder.start(path)
            agent_run(tg.Guard(), mode, how=how)
            wait_for_all_tracers()  # LangSmith's spans are made in its background thread
            runs[name] = recorder.summary(path)
    return runs


if __name__ == "__main__":
    out = Path(sys.argv[1])
    if sys.argv[2:3] == ["langsmith"]:
        result = langsmith_runs(out, legacy=sys.argv[3:] == ["legacy"])
    else:
        recorder = Recorder()
        result = {
            f"{w} {m}": one_run(w, m, out, recorder)
            for w in sys.argv[2:]
            for m in ("sync", "async")
        }
    print(json.dumps(result))
