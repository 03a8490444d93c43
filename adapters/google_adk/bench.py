"""What ToolGuardPlugin adds to Google ADK's own tool-call path.

The same agent (same tools, same scripted model, a subclass of ADK's BaseLlm) run by an
InMemoryRunner with and without the plugin, in interleaved runs within one process (the
order rotates, so a load change hits every arm alike). Each run: a user message, five model
turns of tool calls (the first three parallel calls), seven calls in all, a final answer.
Tracing off: no OpenTelemetry SDK provider, so ADK's spans and the guard's are no-ops, as in
production without an exporter. Prints the median CPU time per run of each arm and the ratio
(median with / median without; target at most 1.05), the same for wall time, and, for
scale, what a plugin that does nothing costs in ADK.

    .venv/bin/python adapters/google_adk/bench.py [--rounds 20] [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import statistics
import time
from collections.abc import AsyncGenerator

import toolguard as tg
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner
from google.genai import types

from toolguard_google_adk import ToolGuardPlugin

CONTACTS = {f"id_{i}": {"id": f"id_{i}", "phone": f"+1-555-{i:04d}"} for i in range(50)}
CALLS = 7


def search_contacts(phone: str) -> list[dict[str, str]]:
    """Contacts with this phone number."""
    return [c for c in CONTACTS.values() if c["phone"] == phone]


def read_contact(contact_id: str) -> dict[str, str]:
    """One contact by id."""
    return CONTACTS[contact_id]


class Script(BaseLlm):
    """Three parallel searches, then four reads of the id found, then an answer."""

    model: str = "script"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        turn = sum(1 for c in llm_request.contents if c.role == "model")
        if turn == 0:
            calls = [("search_contacts", {"phone": f"+1-555-{i:04d}"}) for i in (1, 2, 3)]
        elif turn <= 4:
            calls = [("read_contact", {"contact_id": "id_1"})]
        else:
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))
            return
        parts = [types.Part(function_call=types.FunctionCall(name=n, args=a)) for n, a in calls]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


class Nothing(BasePlugin):
    """A plugin that does nothing: what ADK charges for having one at all."""


def runner(plugins: list[BasePlugin], name: str) -> InMemoryRunner:
    agent = LlmAgent(name="bench", model=Script(), tools=[search_contacts, read_contact])
    return InMemoryRunner(app=App(name=name, root_agent=agent, plugins=plugins))


def arms() -> dict[str, InMemoryRunner]:
    contracts = {
        "search_contacts": {"produces": {"id": "contact_id"}},
        "read_contact": {"refs": {"contact_id": "contact_id"}},
    }
    guarded = ToolGuardPlugin(tg.Guard(), contracts=contracts)  # no provider: tracing off
    return {
        "without": runner([], "without"),
        "with": runner([guarded], "with"),
        "empty plugin": runner([Nothing("nothing")], "empty"),
    }


async def timed_run(subject: InMemoryRunner) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one invocation in a new session. CPU time of the whole
    process is the headline: on a shared machine, wall time also counts waiting for a CPU."""
    session = await subject.session_service.create_session(app_name=subject.app_name, user_id="u")
    text = types.Content(role="user", parts=[types.Part(text="find and read")])
    cpu, wall = time.process_time(), time.perf_counter()
    events = [
        e async for e in subject.run_async(user_id="u", session_id=session.id, new_message=text)
    ]
    elapsed = (time.process_time() - cpu, time.perf_counter() - wall)
    last = events[-1].content
    assert last is not None and last.parts and last.parts[0].text == "done"
    assert sum(len(e.get_function_responses()) for e in events) == CALLS
    return elapsed


async def main(rounds: int, runs: int) -> float:
    logging.disable(logging.WARNING)  # ADK logs a warning per model turn (no token counts)
    subjects = arms()
    for _ in range(5):  # warm every path (imports, schema caches)
        for subject in subjects.values():
            await timed_run(subject)
    names = list(subjects)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    gc.disable()  # a collection landing in one arm's run is noise, not cost
    try:
        for i in range(rounds):
            for j in range(runs):
                k = (i * runs + j) % len(names)
                for name in names[k:] + names[:k]:
                    times[name].append(await timed_run(subjects[name]))
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
            f"with ToolGuardPlugin ({(with_ - without) / CALLS * 1e6:+.0f} us per tool call), "
            f"ratio {with_ / without:.3f}; an empty plugin alone: "
            f"{median['empty plugin'] / without:.3f}"
        )
    print(f"ratio (median with / median without, CPU time): {ratios[0]:.3f}  (target <= 1.05)")
    return ratios[0]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.runs))
