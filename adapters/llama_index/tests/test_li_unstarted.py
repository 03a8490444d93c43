"""Calls the model emitted that LlamaIndex never runs (its ``max_iterations`` reached on the
turn that made them): each takes its step and ends ``cancelled``, a lone call as well as
calls of a turn of several, so every call counted in T has a verdict and a span."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from conftest import Telemetry, scripted
from llama_index.core.agent.workflow import FunctionAgent
from workflows.errors import WorkflowRuntimeError

from toolguard_llama_index import guard_agent


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("stopping", ["force", "generate"])
def test_calls_stopped_by_max_iterations_end_cancelled(
    otel: Telemetry, count: int, stopping: Literal["force", "generate"]
) -> None:
    guard = otel.guard()
    ran: list[str] = []

    def record(text: str) -> str:
        """Echo the text."""
        ran.append(text)
        return text

    llm = scripted(
        [("record", {"text": "first"})], [("record", {"text": str(i)}) for i in range(count)]
    )
    agent = guard_agent(FunctionAgent(tools=[record], llm=llm), guard)

    async def go() -> None:
        await agent.run("go", max_iterations=2, early_stopping_method=stopping)

    with guard.trajectory("stopped") as traj:
        if stopping == "force":
            with pytest.raises(WorkflowRuntimeError, match="Max iterations"):
                asyncio.run(go())
        else:
            asyncio.run(go())
    assert ran == ["first"]  # the second turn's calls never ran
    assert traj.length == 1 + count
    assert sorted((v.step, v.decision) for v in traj.verdicts) == [
        (1, "allowed"),
        *((2 + i, "cancelled") for i in range(count)),
    ]
