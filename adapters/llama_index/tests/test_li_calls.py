"""Calls through a real FunctionAgent / AgentWorkflow: steps, causes, what the model gets."""

from __future__ import annotations

import asyncio
from typing import Any

import toolguard as tg
from conftest import Telemetry, run, scripted
from li_context_tool import remember
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ToolCallResult
from llama_index.core.llms import ChatMessage
from llama_index.core.workflow import Context

from toolguard_llama_index import GuardedFunctionTool, guard_agent, guard_tool


def lookup(key: str) -> dict[str, str]:
    """Look a key up."""
    return {"id": f"item-{key}"}


def verdicts(traj: tg.Trajectory) -> list[tuple[int, str, bool, str | None]]:
    return sorted((v.step, v.tool, v.valid, v.check) for v in traj.verdicts)


def answers_of(agent: Any, *args: Any, **kwargs: Any) -> list[ToolCallResult]:
    """Run the agent, collecting the tool results LlamaIndex streams (what the model gets)."""

    async def go() -> list[ToolCallResult]:
        handler = agent.run(*args, **kwargs)
        out = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
        await handler
        return out

    return asyncio.run(go())


def test_parallel_calls_take_steps_in_emission_order(otel: Telemetry) -> None:
    # The first call is held on an event the third sets: they finish in the order b, c, a.
    order: list[str] = []
    third_done = asyncio.Event()

    async def slow(key: str) -> dict[str, str]:
        """Waits for the third call."""
        await third_done.wait()
        order.append(key)
        return {"id": key}

    async def fast(key: str) -> dict[str, str]:
        """Returns at once."""
        order.append(key)
        if key == "c":
            third_done.set()
        return {"id": key}

    guard = otel.guard()
    model = scripted([("slow", {"key": "a"}), ("fast", {"key": "b"}), ("fast", {"key": "c"})])
    agent = guard_agent(FunctionAgent(tools=[slow, fast], llm=model), guard)
    with guard.trajectory("parallel") as traj:
        run(agent, "go")
    assert order == ["b", "c", "a"]
    assert verdicts(traj) == [
        (1, "slow", True, None),
        (2, "fast", True, None),
        (3, "fast", True, None),
    ]
    steps = {
        s.attributes["gen_ai.tool.call.id"]: s.attributes["toolguard.step"]
        for s in otel.call_spans()
    }
    assert steps == {"t0-0": 1, "t0-1": 2, "t0-2": 3}


def test_an_unknown_tool_is_a_schema_step_and_llamaindex_answers_it(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted([("lookup", {"key": "k"}), ("lokup", {"key": "k"})])
    agent = guard_agent(FunctionAgent(tools=[lookup], llm=model), guard)
    with guard.trajectory("unknown") as traj:
        results = answers_of(agent, "go")
    assert verdicts(traj) == [(1, "lookup", True, None), (2, "lokup", False, "schema.tool")]
    unknown = next(r for r in results if r.tool_name == "lokup")
    assert unknown.tool_output.is_error and "not found" in unknown.tool_output.content


def test_a_missing_argument_is_refused_by_the_guard(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted([("lookup", {})], [("lookup", {"key": "k"})])
    agent = guard_agent(FunctionAgent(tools=[lookup], llm=model), guard)
    with guard.trajectory("missing") as traj:
        results = answers_of(agent, "go")
    assert verdicts(traj) == [(1, "lookup", False, "schema.args"), (2, "lookup", True, None)]
    first = results[0].tool_output
    assert first.is_error
    assert first.content.startswith("Error: the call to `lookup` was rejected (schema)")


def explode(key: str) -> dict[str, str]:
    """Fails."""
    raise RuntimeError(f"secret {key}")


def test_a_tool_that_raises_is_state_consistency_delivered_to_the_model(otel: Telemetry) -> None:
    guard = otel.guard()
    agent = guard_agent(
        FunctionAgent(tools=[explode], llm=scripted([("explode", {"key": "k1"})])), guard
    )
    with guard.trajectory("raises") as traj:
        results = answers_of(agent, "go")
    assert verdicts(traj) == [(1, "explode", False, "state.exception")]
    output = results[0].tool_output
    assert output.is_error and "(state_consistency)" in output.content
    (span,) = otel.call_spans()
    assert span.attributes["toolguard.decision"] == "allowed"
    assert "k1" not in str(dict(span.attributes))  # the exception's text is not recorded


def test_tool_errors_raise_keeps_llamaindexs_own_answer(otel: Telemetry) -> None:
    guard = otel.guard()
    agent = guard_agent(
        FunctionAgent(tools=[explode], llm=scripted([("explode", {"key": "k1"})])),
        guard,
        tool_errors="raise",
    )
    with guard.trajectory("raises") as traj:
        results = answers_of(agent, "go")
    assert verdicts(traj) == [(1, "explode", False, "state.exception")]
    output = results[0].tool_output
    assert output.is_error and output.content == "secret k1"  # LlamaIndex's: the exception


def test_an_error_result_is_state_consistency(otel: Telemetry) -> None:
    def flaky(key: str) -> dict[str, str]:
        """Reports an error."""
        return {"error": "the service is down"}

    guard = otel.guard()
    agent = guard_agent(
        FunctionAgent(tools=[flaky], llm=scripted([("flaky", {"key": "k"})])), guard
    )
    with guard.trajectory("error-result") as traj:
        results = answers_of(agent, "go")
    assert verdicts(traj) == [(1, "flaky", False, "state.error_result")]
    assert results[0].tool_output.raw_output == {"error": "the service is down"}  # the tool's


def test_log_mode_runs_the_invalid_call_and_records_it(otel: Telemetry) -> None:
    removed: list[str] = []

    async def remove(contact_id: str) -> dict[str, str]:
        """Remove a contact."""
        removed.append(contact_id)
        return {"removed": contact_id}

    guard = otel.guard(mode="log")
    agent = guard_agent(
        FunctionAgent(tools=[remove], llm=scripted([("remove", {"contact_id": "made-up"})])),
        guard,
        contracts={"remove": {"refs": {"contact_id": "contact_id"}}},
    )
    with guard.trajectory("logged") as traj:
        run(agent, "go")
    assert removed == ["made-up"]
    (verdict,) = traj.verdicts
    assert (verdict.valid, verdict.cause, verdict.decision) == (False, "dependency", "logged")


def test_call_ids_reused_in_later_turns_keep_every_step(otel: Telemetry) -> None:
    # Some OpenAI-compatible servers number calls per turn; here every turn's ids are t0-*.
    guard = otel.guard()
    first = [("lookup", {"key": "a"}), ("missing", {})]
    second = [("lookup", {"key": "b"}), ("lookup", {})]
    model = scripted(first, second)
    respond = model._get_response_generator()

    def same_ids(messages: Any, **kwargs: Any) -> ChatMessage:
        message = respond(messages, **kwargs)
        for i, block in enumerate(getattr(message, "blocks", [])):
            if hasattr(block, "tool_call_id"):
                block.tool_call_id = f"call_{i}"
        return message

    model.response_generator = same_ids
    agent = guard_agent(FunctionAgent(tools=[lookup], llm=model), guard)
    with guard.trajectory("reused") as traj:
        run(agent, "go")
    assert verdicts(traj) == [
        (1, "lookup", True, None),
        (2, "missing", False, "schema.tool"),
        (3, "lookup", True, None),
        (4, "lookup", False, "schema.args"),
    ]


def test_a_tool_that_takes_the_context_still_gets_it(otel: Telemetry) -> None:
    guard = otel.guard()
    agent = guard_agent(
        FunctionAgent(tools=[remember], llm=scripted([("remember", {"note": "x"})])), guard
    )
    ctx = Context(agent)
    with guard.trajectory("context") as traj:
        run(agent, "go", ctx=ctx)
    assert verdicts(traj) == [(1, "remember", True, None)]
    assert asyncio.run(ctx.store.get("note")) == "x"
    assert isinstance(agent.tools[0], GuardedFunctionTool)


def test_a_guarded_tool_called_directly(otel: Telemetry) -> None:
    guard = otel.guard()
    tool = guard_tool(lookup, guard)
    with guard.trajectory("direct") as traj:
        ok = tool.call(key="k")
        refused = tool.call(nope=1)
    assert ok.raw_output == {"id": "item-k"}
    assert refused.is_error and "(schema)" in refused.content
    assert verdicts(traj) == [(1, "lookup", True, None), (2, "lookup", False, "schema.args")]


def test_an_agent_workflows_handoff_is_no_step(otel: Telemetry) -> None:
    guard = otel.guard()
    front = FunctionAgent(
        name="front",
        description="Hands over.",
        tools=[lookup],
        llm=scripted([("lookup", {"key": "a"}), ("handoff", {"to_agent": "back", "reason": "x"})]),
        can_handoff_to=["back"],
    )
    back = FunctionAgent(
        name="back",
        description="Looks up.",
        tools=[lookup],
        # The agents share the conversation: the handoff is its first assistant message.
        llm=scripted("unused", [("lookup", {"key": "k"})]),
    )
    workflow = guard_agent(AgentWorkflow(agents=[front, back], root_agent="front"), guard)
    with guard.trajectory("handoff") as traj:
        run(workflow, "go")
    # The handoff, a call of the same turn as the first lookup, takes no step.
    assert verdicts(traj) == [(1, "lookup", True, None), (2, "lookup", True, None)]
    assert traj.length == 2
