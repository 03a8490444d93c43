"""What ToolGuard adds to Pydantic AI's own tool-call path.

The same agent (same tools, same scripted FunctionModel) with and without the capability,
in interleaved rounds within one process; tracing off (no SDK provider), as in production
without an exporter. Each run: a user prompt, five model turns of tool calls (one of them
three parallel calls), seven tool calls in all, a final answer. Prints the median time per
run of each, and the ratio (median with / median without); the target is at most 1.05.
The headline is CPU time (the process's, tool threads included); wall time is printed too,
and a third arm, the agent with a capability that does nothing, shows what Pydantic AI
itself charges for having a capability at all.

    .venv/bin/python adapters/pydantic_ai/bench.py [--rounds 30] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from typing import Any

import toolguard as tg
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolguard_pydantic_ai import ToolGuard

CONTACTS = {f"id_{i}": {"id": f"id_{i}", "phone": f"+1-555-{i:04d}"} for i in range(50)}


def search_contacts(phone: str) -> list[dict[str, str]]:
    return [c for c in CONTACTS.values() if c["phone"] == phone]


def read_contact(contact_id: str) -> dict[str, str]:
    return CONTACTS[contact_id]


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    found = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if turn == 0:
        phones = [f"+1-555-{i:04d}" for i in (1, 2, 3)]
        return ModelResponse(
            parts=[ToolCallPart("search_contacts", {"phone": p}) for p in phones]
        )  # three parallel calls
    if turn <= 4:
        contact_id = found[0].content[0]["id"] if turn == 1 else found[0].content["id"]
        return ModelResponse(parts=[ToolCallPart("read_contact", {"contact_id": contact_id})])
    return ModelResponse(parts=[TextPart("done")])


class Nothing(AbstractCapability[Any]):
    """A capability that does nothing: what Pydantic AI charges for having one at all."""


def agent(guarded: bool, empty: bool = False) -> Agent[None, str]:
    capabilities: list[Any] = [Nothing()] if empty else []
    if guarded:
        guard = tg.Guard()  # no tracer provider: tracing off
        contracts = {
            "search_contacts": {"produces": {"id": "contact_id"}},
            "read_contact": {"refs": {"contact_id": "contact_id"}},
        }
        capabilities.append(ToolGuard(guard, contracts=contracts))
    return Agent(
        FunctionModel(respond),
        tools=[search_contacts, read_contact],
        capabilities=capabilities,
    )


async def timed_run(subject: Agent[None, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run. CPU time of the whole process (the tool threads
    included) is the headline: on a shared machine, wall time also counts waiting for a CPU."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = await subject.run("find and read")
    elapsed = (time.process_time() - cpu, time.perf_counter() - wall)
    assert result.output == "done"
    return elapsed


async def main(rounds: int, runs: int) -> float:
    arms = {"without": agent(False), "with": agent(True), "empty capability": agent(False, True)}
    for _ in range(5):  # warm every path (imports, schema caches)
        for subject in arms.values():
            await timed_run(subject)
    names = list(arms)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    gc.disable()  # a collection landing in one arm's run is noise, not cost
    try:
        for i in range(rounds):
            for j in range(runs):
                # Interleaved run by run, rotating which goes first, so a load change on the
                # machine hits every arm alike.
                k = (i * runs + j) % len(names)
                for name in names[k:] + names[:k]:
                    times[name].append(await timed_run(arms[name]))
            gc.collect()
    finally:
        gc.enable()
    calls = 7
    print(f"runs per arm: {rounds * runs}; tool calls per run: {calls}; tracing off")
    ratios = []
    for clock, label in ((0, "CPU time"), (1, "wall time")):
        median = {name: statistics.median(t[clock] for t in times[name]) for name in names}
        without, with_ = median["without"], median["with"]
        ratios.append(with_ / without)
        print(
            f"{label:>9}: median per run {without * 1e3:.2f} ms without, {with_ * 1e3:.2f} ms "
            f"with ToolGuard ({(with_ - without) / calls * 1e6:+.0f} us per tool call), ratio "
            f"{with_ / without:.3f}; an empty capability alone: "
            f"{median['empty capability'] / without:.3f}"
        )
    print(f"ratio (median with / median without, CPU time): {ratios[0]:.3f}  (target <= 1.05)")
    return ratios[0]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.runs))
