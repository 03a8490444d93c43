"""Where the guard sits in a FunctionTool, and what of the SDK's tool it keeps."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from agents import Agent, FunctionTool, ModelResponse, Runner, Usage, UserError, function_tool
from agents.testing import ScriptedModel, function_call
from agents.tool import _FailureHandlingFunctionToolInvoker
from oa_contacts import address_book, approval_agent
from oa_support import NO_SDK_TRACING, Telemetry, tool_outputs

from toolguard_openai_agents import guard_agent, guard_tools, guarded_run, reserve_turn


def transfer(amount: int) -> str:
    """Move money."""
    return f"moved {amount}"


def test_guard_sits_between_failure_handler_and_body(otel: Telemetry) -> None:
    # Pins the one SDK internal the adapter relies on (openai-agents 0.24): a decorated
    # tool's invoker is the failure handler, and its body is `_invoke_tool_impl`. If a new
    # SDK moves it, this fails instead of the guard silently missing tool exceptions.
    tool = function_tool(transfer)
    [guarded] = guard_tools([tool], otel.guard())
    assert isinstance(guarded, FunctionTool)
    assert isinstance(guarded.on_invoke_tool, _FailureHandlingFunctionToolInvoker)
    assert guarded.on_invoke_tool._invoke_tool_impl.__qualname__.endswith("guarded")
    assert guarded.__wrapped__ is transfer  # the SDK's view of the decorated callable is kept
    assert tool.on_invoke_tool._invoke_tool_impl is not guarded.on_invoke_tool._invoke_tool_impl
    assert (guarded.name, guarded.params_json_schema) == (tool.name, tool.params_json_schema)


def test_a_hand_made_function_tool_is_guarded_around_its_invoker(otel: Telemetry) -> None:
    seen: list[str] = []

    async def invoke(ctx: Any, arguments: str) -> str:
        if json.loads(arguments)["n"] < 0:
            raise ValueError("negative")
        seen.append(ctx.tool_call_id)
        return "ok"

    tool = FunctionTool(
        name="count",
        description="Count.",
        params_json_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": False,
        },
        on_invoke_tool=invoke,
    )
    guard = otel.guard()
    model = ScriptedModel(
        [
            [function_call("count", {"n": 1}, call_id="k1")],
            [function_call("count", {"n": "many"}, call_id="k2")],
            [function_call("count", {"n": -1}, call_id="k3")],
        ]
    )
    agent = guard_agent(Agent(name="a", model=model, tools=[tool]), guard)
    # A hand-made invoker that raises fails the run (the SDK's contract); the guard saw it.
    with pytest.raises(UserError), guarded_run(guard, "hand-made") as traj:
        Runner.run_sync(agent, "count", run_config=NO_SDK_TRACING)
    assert seen == ["k1"]
    assert [(v.call_id, v.check) for v in traj.verdicts] == [
        ("k1", None),
        ("k2", "schema.args"),
        ("k3", "state.exception"),
    ]
    assert tool_outputs(model, 3)["k2"].startswith("Error: the call to `count`")


def test_approval_then_resume_checks_the_approved_call(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = approval_agent(guard, contacts, final="removed")

    with guard.trajectory("approval") as traj:
        first = Runner.run_sync(agent, "remove", run_config=NO_SDK_TRACING)
        [pending] = first.interruptions
        state = first.to_state()
        state.approve(pending)
        second = Runner.run_sync(agent, state, run_config=NO_SDK_TRACING)

    assert second.final_output == "removed" and contacts == {}
    assert [(v.call_id, v.step, v.valid) for v in traj.verdicts] == [
        ("c1", 1, True),
        ("c2", 2, True),
    ]
    assert traj.length == 2


def test_without_the_sdk_the_error_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "import toolguard_openai_agents as t\n"
        "try:\n    t.guard_agent\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "openai-agents>=0.24,<1" in out.stdout
    assert "pip install -e . -e adapters/openai_agents" in out.stdout


def test_a_replayed_turn_takes_no_second_steps(otel: Telemetry) -> None:
    # on_llm_end may fire again for a turn resumed after an approval.
    guard = otel.guard()
    agent = guard_agent(Agent(name="a", tools=[function_tool(transfer)]), guard)
    response = ModelResponse(
        output=[
            function_call("transfer", {"amount": 1}, call_id="t1"),
            function_call("wire", {"amount": 1}, call_id="t2"),
        ],
        usage=Usage(),
        response_id=None,
    )
    with guard.trajectory("replay") as traj:
        reserve_turn(guard, agent, response)
        reserve_turn(guard, agent, response)
        assert traj.length == 2
    assert [(v.call_id, v.step, v.check) for v in traj.verdicts] == [("t2", 2, "schema.tool")]
