"""A tool that raises: the guard records the environment's rejection and leaves the
exception to LangChain (handle_tool_errors, an error middleware, or the run failing), as
without the guard."""

from __future__ import annotations

import asyncio

import pytest
import toolguard as tg
from conftest import Spans, call, scripted, turn
from langchain.agents import create_agent
from langchain.agents.middleware import ToolErrorMiddleware
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from toolguard_langchain import ToolCallGuard, ToolGuardMiddleware


class Broken(Exception):
    pass


@tool
def transfer(amount: int) -> str:
    """Transfer money."""
    raise Broken("insufficient funds")


SCRIPT = (turn(call("transfer", {"amount": 5}, "t1")), "I could not transfer.")


def failed(spans: Spans) -> dict[str, object]:
    (span,) = spans.calls()
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("toolguard.")}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_unhandled_tool_error_fails_the_run_as_without_the_guard(mode: str, spans: Spans) -> None:
    guard = tg.Guard(tracer_provider=spans.provider)
    agent = create_agent(scripted(*SCRIPT), [transfer], middleware=[ToolGuardMiddleware(guard)])
    inputs = {"messages": [("user", "pay 5")]}
    # LangChain's default (handle_tool_errors): an error raised by the tool ends the run. The
    # trajectory opened around it writes its summary with the exception.
    with pytest.raises(Broken), guard.trajectory("pay") as traj:
        if mode == "sync":
            agent.invoke(inputs)
        else:
            asyncio.run(agent.ainvoke(inputs))

    attributes = failed(spans)
    assert attributes["toolguard.decision"] == "allowed"  # it ran; the environment refused
    assert attributes["toolguard.cause"] == "state_consistency"
    assert attributes["toolguard.check"] == "state.exception"
    assert (traj.length, traj.first_error_depth, traj.ended) == (1, 1, True)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_error_middleware_outside_the_guard_answers_the_model(mode: str, spans: Spans) -> None:
    guard = tg.Guard(tracer_provider=spans.provider)
    errors = ToolErrorMiddleware(on_error=lambda exc, request: f"failed: {type(exc).__name__}")
    model = scripted(*SCRIPT)
    agent = create_agent(model, [transfer], middleware=[errors, ToolGuardMiddleware(guard)])
    inputs = {"messages": [("user", "pay 5")]}
    out = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))

    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert (answer.content, answer.status) == ("failed: Broken", "error")
    assert failed(spans)["toolguard.check"] == "state.exception"
    (summary,) = spans.summaries()
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 1


def test_error_middleware_inside_the_guard_is_an_error_result(spans: Spans) -> None:
    guard = tg.Guard(tracer_provider=spans.provider)
    errors = ToolErrorMiddleware(on_error=lambda exc, request: "failed")
    agent = create_agent(
        scripted(*SCRIPT), [transfer], middleware=[ToolGuardMiddleware(guard), errors]
    )
    agent.invoke({"messages": [("user", "pay 5")]})

    attributes = failed(spans)
    assert attributes["toolguard.cause"] == "state_consistency"
    assert attributes["toolguard.check"] == "state.error_result"  # status="error" came back


def test_tool_node_handle_tool_errors_is_an_error_result(spans: Spans) -> None:
    guard = tg.Guard(tracer_provider=spans.provider)
    guarded = ToolCallGuard(guard)
    node = ToolNode([transfer], handle_tool_errors=True, wrap_tool_call=guarded.wrap_tool_call)
    builder = StateGraph(MessagesState)
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    with guard.trajectory("node") as traj:
        out = builder.compile().invoke({"messages": [SCRIPT[0]]})

    assert out["messages"][-1].status == "error"
    assert failed(spans)["toolguard.check"] == "state.error_result"
    assert (traj.length, traj.first_error_depth) == (1, 1)


def test_error_mapping_result_is_an_environment_rejection(spans: Spans) -> None:
    @tool
    def lookup(key: str) -> dict[str, str]:
        """Look a key up."""
        return {"error": "no such key"}

    guard = tg.Guard(tracer_provider=spans.provider)
    agent = create_agent(
        scripted(turn(call("lookup", {"key": "k"}, "l1")), "none"),
        [lookup],
        middleware=[ToolGuardMiddleware(guard)],
    )
    agent.invoke({"messages": [("user", "look k up")]})
    assert failed(spans)["toolguard.check"] == "state.error_result"


def test_success_callback_that_raises_leaves_the_outcome_unknown(spans: Spans) -> None:
    def success(state: object) -> bool:
        raise RuntimeError("bug in the checker")

    guard = tg.Guard(tracer_provider=spans.provider)
    agent = create_agent(
        scripted("nothing to do"),
        [transfer],
        middleware=[ToolGuardMiddleware(guard, success=success)],
    )
    out = agent.invoke({"messages": [("user", "hi")]})
    assert out["messages"][-1].content == "nothing to do"
    (summary,) = spans.summaries()
    assert "toolguard.trajectory.success" not in (summary.attributes or {})
    assert summary.attributes["toolguard.trajectory.length"] == 0
