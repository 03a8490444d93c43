"""A guarded call made while a guarded call of its trajectory runs is nested: no step, from
any entry point (the agent emitted only the outer call)."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Annotated, Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolguard as tg

OUTER = ["direct", "call", "acall", "batch", "helper"]
SYNC_INNER = ["direct", "call", "call with trajectory", "check with trajectory", "helper"]
ASYNC_INNER = [*SYNC_INNER, "async direct", "acall", "acall with trajectory", "batch", "ahelper"]


def turn(name: str, call_id: str) -> dict[str, Any]:
    """A chat completion message calling ``name``: what run_openai_tool_calls reads."""
    function = {"name": name, "arguments": "{}"}
    return {"role": "assistant", "tool_calls": [{"id": call_id, "function": function}]}


@st.composite
def episodes(draw: st.DrawFn) -> list[tuple[bool, str, list[str]]]:
    """Outer calls: whether the outer tool is async, its entry point, its inner calls."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        is_async = draw(st.booleans())
        inner = st.sampled_from(ASYNC_INNER if is_async else SYNC_INNER)
        out.append((is_async, draw(st.sampled_from(OUTER)), draw(st.lists(inner, max_size=3))))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episode=episodes())
def test_steps_count_the_outer_calls_only(episode: list[tuple[bool, str, list[str]]]) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = tg.Guard(tracer_provider=provider)
    ids = (f"id-{n}" for n in itertools.count())
    plan: dict[str, list[str]] = {}  # outer tool name -> its inner calls

    def inner() -> str:
        return "in"

    async def ainner() -> str:
        return "in"

    inner_fn = guard.register(inner)
    ainner_fn = guard.register(ainner)

    def sync_inner(how: str) -> None:
        traj = tg.current_trajectory()
        if how == "direct":
            inner_fn()
        elif how == "call":
            guard.call("inner")
        elif how == "call with trajectory":
            guard.call("inner", trajectory=traj)
        elif how == "check with trajectory":
            pending = guard.check("inner", {}, trajectory=traj)
            if pending.rejection is None:
                pending.finish("in")
        elif how == "helper":
            tg.run_openai_tool_calls(guard, turn("inner", next(ids)), trajectory=traj)

    async def async_inner(how: str) -> None:
        traj = tg.current_trajectory()
        if how == "async direct":
            await ainner_fn()
        elif how == "acall":
            await guard.acall("ainner")
        elif how == "acall with trajectory":
            await guard.acall("ainner", trajectory=traj)
        elif how == "batch":
            await guard.acall_batch([("inner", {}), ("ainner", {}, next(ids))])
        elif how == "ahelper":
            await tg.arun_openai_tool_calls(guard, turn("ainner", next(ids)))
        else:
            sync_inner(how)

    def outer_tool(name: str, is_async: bool) -> Any:
        if is_async:

            async def run() -> str:
                for how in plan[name]:
                    await async_inner(how)
                return "out"

        else:

            def run() -> str:  # type: ignore[misc]
                for how in plan[name]:
                    sync_inner(how)
                return "out"

        return guard.register(run, name=name)

    async def main() -> tg.Trajectory:
        with guard.trajectory("t") as traj:
            for n, (is_async, how, inner_calls) in enumerate(episode):
                name = f"outer_{n}"
                plan[name] = inner_calls
                fn = outer_tool(name, is_async)
                if how == "direct":
                    result = await fn() if is_async else fn()
                elif how == "call":
                    result = guard.call(name)
                    result = await result if is_async else result
                elif how == "acall":
                    result = await guard.acall(name)
                elif how == "batch":
                    (result,) = await guard.acall_batch([(name, {})])
                else:
                    reply = (
                        await tg.arun_openai_tool_calls(guard, turn(name, next(ids)))
                        if is_async
                        else tg.run_openai_tool_calls(guard, turn(name, next(ids)))
                    )
                    result = reply[0]["content"]
                assert result == "out"
        return traj

    traj = asyncio.run(main())
    outer = len(episode)
    assert traj.length == outer
    assert sorted(v.step for v in traj.verdicts) == list(range(1, outer + 1))
    assert all(v.tool.startswith("outer_") and v.valid for v in traj.verdicts)
    calls = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")]
    stepped = sorted(
        s.attributes["toolguard.step"] for s in calls if "toolguard.step" in s.attributes
    )
    assert stepped == list(range(1, outer + 1))
    assert len(calls) == outer + sum(len(inner) + inner.count("batch") for _, _, inner in episode)
    summary = [s for s in exporter.get_finished_spans() if s.name == "toolguard.trajectory"]
    assert summary[0].attributes["toolguard.trajectory.length"] == outer
    provider.shutdown()


def test_a_call_handed_its_trajectory_inside_a_dry_run_is_nested_too() -> None:
    """The dry run marks the call it tries with that call's trajectory, as a real run does:
    an inner call handed the trajectory explicitly is no step either."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = tg.Guard(tracer_provider=provider, state={"n": 0}, dry_run=tg.DeepCopyFork())

    @guard.tool(dry_run=False)
    def inner() -> str:
        return "in"

    with guard.trajectory("t") as traj:

        @guard.tool
        def outer(db: Annotated[dict[str, int], tg.State]) -> str:
            guard.call("inner", {}, trajectory=traj)
            return "out"

        assert guard.call("outer", {}) == "out"
    steps = [
        s.attributes.get("toolguard.step")
        for s in exporter.get_finished_spans()
        if s.name.startswith("execute_tool ")
    ]
    assert sorted(step for step in steps if step is not None) == [1]


@settings(max_examples=40, deadline=None)
@given(how=st.lists(st.sampled_from(["direct", "call", "acall", "batch", "helper"]), max_size=4))
def test_a_tool_that_opens_a_trajectory_of_its_own_counts_its_calls_there(
    how: list[str],
) -> None:
    """An agent used as a tool (a sub-agent) runs its own episode: its calls are steps of its
    trajectory and are checked against it; only calls of the running tool's own trajectory
    are nested."""
    guard = tg.Guard()
    ids = (f"id-{n}" for n in itertools.count())

    @guard.tool(produces={"id": "item"})
    def find() -> dict[str, str]:
        return {"id": "i-1"}

    @guard.tool(refs={"item": "item"})
    def use(item: str) -> str:
        return item

    async def inner_call(entry: str, item: str) -> Any:
        if entry == "direct":
            try:
                return use(item=item)
            except tg.ToolCallRejected as exc:
                return exc.rejection
        if entry == "call":
            return guard.call("use", {"item": item})
        if entry == "acall":
            return await guard.acall("use", {"item": item})
        if entry == "batch":
            (answer,) = await guard.acall_batch([("use", {"item": item})])
            return answer
        function = {"name": "use", "arguments": json.dumps({"item": item})}
        message = {"role": "assistant", "tool_calls": [{"id": next(ids), "function": function}]}
        (reply,) = await tg.arun_openai_tool_calls(guard, message)
        return reply["content"]

    @guard.tool
    async def sub_agent() -> list[Any]:
        answers = []
        with guard.trajectory("inner") as inner:
            find()
            for entry in how:
                answers.append(await inner_call(entry, "i-1"))
                answers.append(await inner_call(entry, "made-up"))
        assert inner.length == 1 + 2 * len(how)
        assert inner.first_error_depth == (3 if how else 2)  # the first made-up id
        return answers

    async def main() -> tg.Trajectory:
        with guard.trajectory("outer") as outer:
            await sub_agent()
        return outer

    assert asyncio.run(main()).length == 1
