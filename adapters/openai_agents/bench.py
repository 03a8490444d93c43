"""What the adapter adds to the OpenAI Agents SDK's own tool-call path.

The same agent and the same scripted model (``agents.testing.ScriptedModel``), run by
``Runner.run`` with and without the adapter, in interleaved rounds of one process (the order
flips every round, so drift hits both arms alike). One episode is ``--turns`` model turns of
``--calls`` parallel calls each, then a final answer. Printed: the median episode time of each
arm, the ratio (median with / median without) and the cost per call.

Tracing is off for the headline: no OpenTelemetry SDK provider (the guard's spans are no-ops)
and the SDK's own tracing disabled in both arms. ``--otel`` installs an SDK provider for the
guard (a span per call and per episode, exported to nowhere) for the traced figure.

    python adapters/openai_agents/bench.py [--rounds 300] [--turns 5] [--calls 2] [--otel]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Sequence
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

import toolguard as tg
from toolguard_openai_agents import guard_agent, guarded_run

CONFIG = RunConfig(tracing_disabled=True)


@function_tool
async def lookup(key: str) -> dict[str, str]:
    """Look a key up."""
    return {"id": f"item-{key}", "key": key}


def script(turns: int, calls: int) -> list[Any]:
    steps: list[Any] = [
        [function_call("lookup", {"key": f"{t}-{c}"}, call_id=f"c{t}-{c}") for c in range(calls)]
        for t in range(turns)
    ]
    return [*steps, [assistant_message("done")]]


def tracer_provider(otel: bool) -> Any:
    if not otel:
        return None
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Nowhere(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Nowhere()))
    return provider


async def episode(
    agent: Agent[Any], steps: list[Any], guard: tg.Guard | None
) -> tuple[float, float]:
    """(wall, CPU) seconds of one episode. CPU time is this process's alone: other work on
    a shared machine slows the wall clock of both arms but barely moves it."""
    runnable = agent.clone(model=ScriptedModel(steps))  # built outside the timed part
    wall, cpu = time.perf_counter(), time.process_time()
    if guard is None:
        await Runner.run(runnable, "look them up", run_config=CONFIG)
    else:
        async with guarded_run(guard, labels={"bench": "openai_agents"}):
            await Runner.run(runnable, "look them up", run_config=CONFIG)
    return time.perf_counter() - wall, time.process_time() - cpu


async def measure(
    rounds: int, turns: int, calls: int, otel: bool
) -> dict[str, list[tuple[float, float]]]:
    plain = Agent(name="bench", tools=[lookup])
    guard = tg.Guard(tracer_provider=tracer_provider(otel))
    guarded = guard_agent(plain, guard, contracts={"lookup": {"produces": {"id": "item_id"}}})
    steps = script(turns, calls)
    arms: dict[str, tuple[Agent[Any], tg.Guard | None]] = {
        "without": (plain, None),
        "with": (guarded, guard),
    }
    for _ in range(20):  # warm-up: imports, validators, caches
        for agent, g in arms.values():
            await episode(agent, steps, g)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
    gc.collect()
    for r in range(rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        for name in order:
            agent, g = arms[name]
            times[name].append(await episode(agent, steps, g))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2, help="parallel calls per turn")
    parser.add_argument("--otel", action="store_true", help="an SDK provider for the guard")
    args = parser.parse_args()
    times = asyncio.run(measure(args.rounds, args.turns, args.calls, args.otel))
    n_calls = args.turns * args.calls
    print(
        f"openai-agents episode: {args.turns} turns x {args.calls} calls, {args.rounds} rounds, "
        f"tracing {'on (SDK provider)' if args.otel else 'off'}"
    )
    print(f"{'':24}{'without':>12}{'with':>12}{'per call':>12}{'ratio':>9}{'paired':>9}")
    for clock, index in (("wall", 0), ("cpu", 1)):
        without = statistics.median(t[index] for t in times["without"])
        with_ = statistics.median(t[index] for t in times["with"])
        added = (with_ - without) / n_calls * 1e6
        # The same round's two episodes ran back to back: their ratio shrugs off slow drift.
        paired = statistics.median(
            w[index] / o[index] for w, o in zip(times["with"], times["without"], strict=True)
        )
        print(
            f"  median episode, {clock:4}  {without * 1e3:9.3f} ms{with_ * 1e3:9.3f} ms"
            f"{added:9.1f} us{with_ / without:9.3f}{paired:9.3f}"
        )
    print("ratio: median with / median without; paired: median of the rounds' own ratios")


if __name__ == "__main__":
    main()
