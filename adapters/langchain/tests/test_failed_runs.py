"""A run that raises still writes its trajectory's summary (issue 23, defect 5): with its
labels, the outcome unknown, the error on the span; failing runs stay in their cohort. A
failure no hook of the middleware sees (the graph's recursion limit) ends it at interpreter
exit at the latest."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toolguard as tg
from conftest import ScriptedModel, Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain_core.tools import tool

from toolguard_langchain import ToolGuardMiddleware


class ModelDown(ScriptedModel):
    """The scripted turns, then the provider fails."""

    def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        if len(self.received) >= 1:
            raise ConnectionError("the provider is down")
        return super()._generate(messages, *args, **kwargs)


@tool
def ping() -> str:
    """Ping."""
    return "pong"


@tool
def explode() -> str:
    """Explode."""
    raise RuntimeError("boom")


def _run(agent: Any, mode: str) -> None:
    inputs = {"messages": [("user", "go")]}
    if mode == "async":
        asyncio.run(agent.ainvoke(inputs))
    else:
        agent.invoke(inputs)


def _failed_summary(spans: Spans, guard: tg.Guard) -> dict[str, Any]:
    (summary,) = spans.summaries()
    attributes = dict(summary.attributes or {})
    assert attributes["toolguard.label.model"] == "m"
    assert "toolguard.trajectory.success" not in attributes  # unknown, not False
    assert not summary.status.is_ok
    assert len(guard.trajectories) == 0  # nothing left open
    return attributes


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_tool_that_raises_out_of_the_run_ends_its_trajectory(mode: str, spans: Spans) -> None:
    guard = tg.Guard(tracer_provider=spans.provider)
    middleware = ToolGuardMiddleware(guard, labels={"model": "m"}, success=lambda s: True)
    model = scripted(turn(call("ping", {}, "p1")), turn(call("explode", {}, "x1")), "never")
    agent = create_agent(model, [ping, explode], middleware=[middleware])

    with pytest.raises(RuntimeError, match="boom"):
        _run(agent, mode)

    attributes = _failed_summary(spans, guard)
    assert attributes["toolguard.trajectory.length"] == 2
    assert attributes["toolguard.trajectory.first_error_depth"] == 2
    assert attributes["toolguard.trajectory.first_error.cause"] == "state_consistency"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_model_that_raises_ends_its_trajectory(mode: str, spans: Spans) -> None:
    guard = tg.Guard(tracer_provider=spans.provider)
    middleware = ToolGuardMiddleware(guard, labels={"model": "m"})
    model = ModelDown(messages=iter([turn(call("ping", {}, "p1"))]))
    agent = create_agent(model, [ping], middleware=[middleware])

    with pytest.raises(ConnectionError):
        _run(agent, mode)

    attributes = _failed_summary(spans, guard)
    assert attributes["toolguard.trajectory.length"] == 1
    assert attributes["toolguard.trajectory.first_error_depth"] == 2


AT_EXIT = """
import sys
sys.path.insert(0, {tests!r})
import toolguard as tg
from conftest import call, scripted, turn
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.errors import GraphRecursionError
from toolguard_langchain import ToolGuardMiddleware

@tool
def ping() -> str:
    '''Ping.'''
    return "pong"

tg.setup_file_export({path!r})
guard = tg.Guard()
model = scripted(*[turn(call("ping", {{}}, f"p{{i}}")) for i in range(20)])
middleware = ToolGuardMiddleware(guard, labels={{"model": "m"}})
agent = create_agent(model, [ping], middleware=[middleware])
try:
    agent.invoke({{"messages": [("user", "go")]}}, {{"recursion_limit": 6}})
except GraphRecursionError:
    print("recursion limit")
"""


def test_a_failure_no_hook_sees_ends_the_trajectory_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    code = AT_EXIT.format(tests=str(Path(__file__).parent), path=str(path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "recursion limit" in done.stdout
    summaries = [
        span
        for line in path.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
        if span["name"] == "toolguard.trajectory"
    ]
    assert len(summaries) == 1
    keys = {a["key"] for a in summaries[0]["attributes"]}
    assert "toolguard.label.model" in keys and "toolguard.trajectory.success" not in keys
