"""Test helpers: telemetry read back from an in-memory exporter, one episode run either way.

The global tracer provider is never set: every guard gets ``tracer_provider=`` explicitly.
The SDK's own tracing is switched off per run (it would try to export to OpenAI).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from agents import Agent, RunConfig, Runner, RunResult
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolguard as tg
from toolguard_openai_agents import guarded_run

NO_SDK_TRACING = RunConfig(tracing_disabled=True)


@dataclass
class Telemetry:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def guard(self, **options: Any) -> tg.Guard:
        return tg.Guard(tracer_provider=self.provider, **options)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def call_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith("execute_tool ")]

    def summary(self) -> ReadableSpan:
        [summary] = [s for s in self.spans() if s.name == "toolguard.trajectory"]
        return summary


@dataclass
class Episode:
    """One run of an agent as one trajectory, through Runner.run_sync or Runner.run."""

    mode: str

    def __call__(
        self,
        guard: tg.Guard,
        agent: Agent[Any],
        prompt: str,
        id: str = "task",
        *,
        labels: dict[str, str] | None = None,
        success: bool | None = None,
        raises: type[BaseException] | None = None,
        **runner_options: Any,
    ) -> tuple[RunResult | None, tg.Trajectory]:
        """The run's result (None when it raised ``raises``, which is then required) and its
        ended trajectory."""
        runner_options.setdefault("run_config", NO_SDK_TRACING)
        opened: list[tg.Trajectory] = []

        def sync() -> RunResult:
            with guarded_run(guard, id, labels=labels, user_input=prompt) as traj:
                opened.append(traj)
                result = Runner.run_sync(agent, prompt, **runner_options)
                traj.success = success
            return result

        async def main() -> RunResult:
            async with guarded_run(guard, id, labels=labels, user_input=prompt) as traj:
                opened.append(traj)
                result = await Runner.run(agent, prompt, **runner_options)
                traj.success = success
            return result

        def go() -> RunResult:
            return sync() if self.mode == "sync" else asyncio.run(main())

        if raises is None:
            return go(), opened[0]
        with pytest.raises(raises):
            go()
        return None, opened[0]


def tool_outputs(model: Any, turn: int) -> dict[str, str]:
    """What the model was given as tool results before its ``turn``-th call (from 1)."""
    received = model.calls[turn - 1].input
    return {
        item["call_id"]: item["output"]
        for item in received
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def streamed(guard: tg.Guard, agent: Agent[Any], mode: Literal["immediate", "after_turn"]) -> Any:
    """The app stops the run the moment the model's answer is complete, before any tool."""

    async def main() -> tg.Trajectory:
        async with guarded_run(guard, "stopped") as traj:
            result = Runner.run_streamed(agent, "go", run_config=NO_SDK_TRACING)
            async for event in result.stream_events():
                raw = event.type == "raw_response_event"
                if raw and getattr(event.data, "type", "") == "response.completed":
                    result.cancel(mode=mode)
        return traj

    return asyncio.run(main())


def decisions(traj: tg.Trajectory) -> list[tuple[str | None, int | None, str, bool]]:
    return sorted((v.call_id, v.step, v.decision, v.valid) for v in traj.verdicts)
