"""What the guard adds to a LangChain agent's own tool-call path.

The same ``create_agent`` agent and the same scripted model (``GenericFakeChatModel``), run
without the guard and with it, in interleaved rounds of one process; tracing off (no SDK
provider; ``--traced``: the guard's spans recorded by an SDK provider whose exporter drops
them, the agent itself still untraced). Two ways to add the guard are measured:

- ``ToolGuardMiddleware``: one trajectory per run, opened and closed by the middleware's
  ``before_agent`` / ``after_agent`` hooks (each one more step of LangGraph's loop);
- ``ToolCallGuard``: the per-call wrapper alone, the caller opening the trajectory
  (``with guard.trajectory(task_id): agent.invoke(...)``, as an evaluation harness does).

Each is measured beside its **framework bound**: a middleware that does nothing, with the
same hooks (LangChain wraps every ``wrap_*`` hook of a middleware in a LangSmith
``traceable``, and LangGraph runs each episode hook as one more step of its loop, whatever
the hook does). Prints, per way, the median time of one run (wall and CPU: all threads of
this process; on a shared machine CPU time is the steadier), its ratio with / without, its
bound's ratio, and the guard's own share (ratio / bound ratio): what the guard adds beyond
what LangChain charges for any such middleware.

    python adapters/langchain/bench.py [--rounds 200] [--runs 3] [--turns 1] [--async]
                                       [--traced]

A run: a search, then ``--turns`` turns of two parallel look-ups whose ids come from the
search (so the dependency check does real work), then the final answer.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import toolguard as tg
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from toolguard_langchain import ToolCallGuard, ToolGuardMiddleware, declare_tool

CONTACTS = {
    "id_1": {"id": "id_1", "name": "Alice", "phone": "+1-555-0199"},
    "id_2": {"id": "id_2", "name": "Bob", "phone": "+1-555-0199"},
}
INPUT = {"messages": [("user", "Who has the phone number +1-555-0199?")]}


class ScriptedModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self


@tool
def search_contacts(phone: str) -> list[dict[str, str]]:
    """Contacts with this phone number."""
    return [c for c in CONTACTS.values() if c["phone"] == phone]


@tool
def get_contact(contact_id: str) -> dict[str, str]:
    """One contact by id."""
    return CONTACTS[contact_id]


class NoopCalls(AgentMiddleware):  # type: ignore[type-arg]
    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


class NoopEpisodes(NoopCalls):
    """The hooks ToolGuardMiddleware has, doing nothing."""

    def before_agent(self, state: Any, runtime: Any) -> None:
        return None

    async def abefore_agent(self, state: Any, runtime: Any) -> None:
        return None

    def after_agent(self, state: Any, runtime: Any) -> None:
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        return None

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


# Each guard arm, and the do-nothing middleware with its hooks: its framework bound.
BOUNDS = {"ToolGuardMiddleware": "no-op, its hooks", "ToolCallGuard": "no-op wrap_tool_call"}


def _call(name: str, args: dict[str, Any], id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": id, "type": "tool_call"}


def script(turns: int) -> list[AIMessage]:
    search = _call("search_contacts", {"phone": "+1-555-0199"}, "s")
    out = [AIMessage(content="", tool_calls=[search])]
    for t in range(turns):
        out.append(
            AIMessage(
                content="",
                tool_calls=[
                    _call("get_contact", {"contact_id": "id_1"}, f"g{t}a"),
                    _call("get_contact", {"contact_id": "id_2"}, f"g{t}b"),
                ],
            )
        )
    return [*out, AIMessage(content="Alice and Bob.")]


class Dropped(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


TRACED: list[Any] = []  # --traced: the guards' tracer provider


def guard() -> tg.Guard:
    # No tracer provider given and none installed: tracing off (unless --traced).
    g = tg.Guard(tracer_provider=TRACED[0] if TRACED else None)
    declare_tool(g, search_contacts, produces={"id": "contact_id"})
    declare_tool(g, get_contact, refs={"contact_id": "contact_id"})
    return g


def agent(turns: int, middleware: list[Any]) -> Any:
    model = ScriptedModel(messages=itertools.cycle(script(turns)))
    return create_agent(model, [search_contacts, get_contact], middleware=middleware)


def runners(turns: int, use_async: bool) -> dict[str, Callable[[], Any]]:
    plain = agent(turns, [])
    noops = {"no-op wrap_tool_call": NoopCalls(), "no-op, its hooks": NoopEpisodes()}
    references = {name: agent(turns, [m]) for name, m in noops.items()}
    per_run_guard = guard()
    per_run = agent(turns, [ToolGuardMiddleware(per_run_guard, labels={"bench": "langchain"})])
    caller_guard = guard()
    calls_only = agent(turns, [ToolCallGuard(caller_guard)])
    if use_async:
        loop = asyncio.new_event_loop()

        async def in_trajectory() -> Any:
            with caller_guard.trajectory(labels={"bench": "langchain"}):
                return await calls_only.ainvoke(INPUT)

        return {
            "without": lambda: loop.run_until_complete(plain.ainvoke(INPUT)),
            "ToolGuardMiddleware": lambda: loop.run_until_complete(per_run.ainvoke(INPUT)),
            "ToolCallGuard": lambda: loop.run_until_complete(in_trajectory()),
            **{
                name: (lambda a=a: loop.run_until_complete(a.ainvoke(INPUT)))
                for name, a in references.items()
            },
        }

    def trajectory_around() -> Any:
        with caller_guard.trajectory(labels={"bench": "langchain"}):
            return calls_only.invoke(INPUT)

    return {
        "without": lambda: plain.invoke(INPUT),
        "ToolGuardMiddleware": lambda: per_run.invoke(INPUT),
        "ToolCallGuard": trajectory_around,
        **{name: (lambda a=a: a.invoke(INPUT)) for name, a in references.items()},
    }


def timed(run: Callable[[], Any], runs: int) -> tuple[float, float]:
    """Wall and CPU seconds per run."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(runs):
        run()
    return (time.perf_counter() - wall) / runs, (time.process_time() - cpu) / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3, help="agent runs per way per round")
    parser.add_argument("--turns", type=int, default=1, help="turns of two parallel calls")
    parser.add_argument("--async", dest="use_async", action="store_true", help="ainvoke")
    parser.add_argument("--traced", action="store_true", help="the guard's spans recorded")
    args = parser.parse_args()
    if args.traced:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(Dropped()))
        TRACED.append(provider)
    ways = runners(args.turns, args.use_async)
    for name, run in ways.items():
        out = run()
        assert out["messages"][-1].content == "Alice and Bob.", (name, out)
        timed(run, 20)  # warm-up: imports, schema caches, thread pools
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in ways}
    gc.collect()
    gc.disable()  # collections land in one arm or the other at random; collect between rounds
    try:
        for i in range(args.rounds):
            order = list(ways) if i % 2 == 0 else list(reversed(ways))
            for name in order:
                times[name].append(timed(ways[name], args.runs))
            gc.collect()
    finally:
        gc.enable()
    calls = 1 + 2 * args.turns
    mode = "ainvoke" if args.use_async else "invoke"
    print(
        f"LangChain create_agent, {mode}: {calls} tool calls in {args.turns + 2} model turns "
        f"per run; {'the guard traced' if args.traced else 'tracing off'}; medians of "
        f"{args.rounds} interleaved rounds of {args.runs} runs"
    )
    for clock, index in (("wall", 0), ("cpu", 1)):
        median = {k: statistics.median(t[index] for t in v) for k, v in times.items()}
        base = median["without"]
        print(f"  {clock}: without the guard {base * 1e3:.3f} ms per run")
        for name, bound in BOUNDS.items():
            ratio, bound_ratio = median[name] / base, median[bound] / base
            print(
                f"    {name:20s} {median[name] * 1e3:8.3f} ms  ratio {ratio:.3f}  "
                f"(+{(median[name] - base) / calls * 1e6:.0f} us per tool call); "
                f"its bound ({bound}) {bound_ratio:.3f}; the guard's share "
                f"{ratio / bound_ratio:.3f}"
            )
    print("  target: ratio <= 1.05 (where the bound alone exceeds it, the bound is what bounds it)")


if __name__ == "__main__":
    main()
