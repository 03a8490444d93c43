"""What guard_agent adds to LlamaIndex's own tool-call path.

The same FunctionAgent (same tools, same scripted MockFunctionCallingLLM) with and without
the guard, in interleaved runs within one process (the order rotates, so a load change hits
every arm alike). Each run: a user message, five model turns of tool calls (the first three
parallel calls), seven calls in all, a final answer. Tracing off (no OpenTelemetry SDK
provider), as in production without an exporter. Prints the median CPU time per run of each
arm and the ratio (median with / median without; target at most 1.05), the same for wall
time, and, for scale, an agent whose tools are wrapped by a FunctionTool that does nothing but
delegate (what any wrapping costs).

    .venv/bin/python adapters/llama_index/bench.py [--rounds 20] [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import warnings
from collections.abc import Sequence
from typing import Any

import toolguard as tg
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from toolguard_llama_index import guard_agent

CONTACTS = {f"id_{i}": {"id": f"id_{i}", "phone": f"+1-555-{i:04d}"} for i in range(50)}
CALLS = 7


def search_contacts(phone: str) -> list[dict[str, str]]:
    """Contacts with this phone number."""
    return [c for c in CONTACTS.values() if c["phone"] == phone]


def read_contact(contact_id: str) -> dict[str, str]:
    """One contact by id."""
    return CONTACTS[contact_id]


def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    turn = sum(1 for m in messages if m.role == MessageRole.ASSISTANT)
    if turn == 0:
        calls = [("search_contacts", {"phone": f"+1-555-{i:04d}"}) for i in (1, 2, 3)]
    elif turn <= 4:
        calls = [("read_contact", {"contact_id": "id_1"})]
    else:
        return ChatMessage(role="assistant", content="done")
    blocks = [
        ToolCallBlock(tool_call_id=f"c{turn}-{i}", tool_name=name, tool_kwargs=args)
        for i, (name, args) in enumerate(calls)
    ]
    return ChatMessage(role="assistant", blocks=blocks)


class Delegate(FunctionTool):
    """A FunctionTool that only delegates: the price of any wrapper, for scale."""

    def __init__(self, tool: FunctionTool) -> None:
        self.__dict__.update(tool.__dict__)

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        return await super().acall(*args, **kwargs)


def agent(arm: str) -> FunctionAgent:
    tools: list[Any] = [
        FunctionTool.from_defaults(search_contacts),
        FunctionTool.from_defaults(read_contact),
    ]
    if arm == "delegating tools":
        tools = [Delegate(t) for t in tools]
    subject = FunctionAgent(tools=tools, llm=MockFunctionCallingLLM(response_generator=respond))
    if arm == "with":
        contracts = {
            "search_contacts": {"produces": {"id": "contact_id"}},
            "read_contact": {"refs": {"contact_id": "contact_id"}},
        }
        guard_agent(subject, tg.Guard(), contracts=contracts)  # no provider: tracing off
    return subject


async def timed_run(subject: FunctionAgent) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run. CPU time of the whole process (the tool threads
    included) is the headline: on a shared machine, wall time also counts waiting for a CPU."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = await subject.run("find and read")
    elapsed = (time.process_time() - cpu, time.perf_counter() - wall)
    assert str(result) == "done" and len(result.tool_calls) == CALLS
    return elapsed


async def main(rounds: int, runs: int) -> float:
    warnings.simplefilter("ignore")  # LlamaIndex warns per run about its context's memory
    arms = {name: agent(name) for name in ("without", "with", "delegating tools")}
    for _ in range(5):  # warm every path (imports, schema caches)
        for subject in arms.values():
            await timed_run(subject)
    names = list(arms)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    gc.disable()  # a collection landing in one arm's run is noise, not cost
    try:
        for i in range(rounds):
            for j in range(runs):
                k = (i * runs + j) % len(names)
                for name in names[k:] + names[:k]:
                    times[name].append(await timed_run(arms[name]))
            gc.collect()
    finally:
        gc.enable()
    print(f"runs per arm: {rounds * runs}; tool calls per run: {CALLS}; tracing off")
    ratios = []
    for clock, label in ((0, "CPU time"), (1, "wall time")):
        median = {name: statistics.median(t[clock] for t in times[name]) for name in names}
        without, with_ = median["without"], median["with"]
        ratios.append(with_ / without)
        print(
            f"{label:>9}: median per run {without * 1e3:.2f} ms without, {with_ * 1e3:.2f} ms "
            f"with guard_agent ({(with_ - without) / CALLS * 1e6:+.0f} us per tool call), "
            f"ratio {with_ / without:.3f}; delegating tools alone: "
            f"{median['delegating tools'] / without:.3f}"
        )
    print(f"ratio (median with / median without, CPU time): {ratios[0]:.3f}  (target <= 1.05)")
    return ratios[0]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.runs))
