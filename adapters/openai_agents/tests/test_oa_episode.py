"""The episode boundary and the agent: run / run_sync / guarded_run, a trajectory of the
user's own, the user's hooks, the original agent left alone, an agent used as a tool."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, AgentHooks, RunContextWrapper, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from oa_contacts import CONTACT_ID, PHONE, address_book, contact_tools, contacts_agent
from oa_support import NO_SDK_TRACING, Episode, Telemetry

import toolguard as tg
from toolguard_openai_agents import guard_agent, guarded_by, guarded_run, run, run_sync

SEARCH_THEN_REMOVE = [
    [function_call("search_contact", {"phone": PHONE}, call_id="c1")],
    [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c2")],
    [assistant_message("removed")],
]


def removed(result: Any) -> bool:
    return bool(result.final_output == "removed")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_run_wrappers_open_label_and_close_one_trajectory(mode: str, otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent, _ = contacts_agent(guard, contacts, SEARCH_THEN_REMOVE)
    options: dict[str, Any] = {
        "trajectory_id": "wrapped",
        "labels": {"model": "scripted", "method": "react"},
        "success": removed,
        "run_config": NO_SDK_TRACING,
    }
    if mode == "sync":
        result = run_sync(guard, agent, f"Remove {PHONE}", **options)
    else:
        result = asyncio.run(run(guard, agent, f"Remove {PHONE}", **options))

    assert result.final_output == "removed"
    summary = otel.summary().attributes
    assert summary["toolguard.trajectory.id"] == "wrapped"
    assert (summary["toolguard.trajectory.length"], summary["toolguard.trajectory.success"]) == (
        2,
        True,
    )
    assert summary["toolguard.trajectory.first_error_depth"] == 3
    assert (summary["toolguard.label.model"], summary["toolguard.label.method"]) == (
        "scripted",
        "react",
    )
    assert guard.find_trajectory("wrapped") is None


def test_a_trajectory_of_the_users_own_spans_several_runs(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    first, _ = contacts_agent(guard, contacts, [*SEARCH_THEN_REMOVE[:1], [assistant_message("ok")]])
    second, _ = contacts_agent(guard, contacts, SEARCH_THEN_REMOVE[1:])

    with guard.trajectory("conversation", labels={"model": "scripted"}) as traj:
        run_sync(guard, first, "find", trajectory=traj, run_config=NO_SDK_TRACING)
        run_sync(guard, second, "remove it", trajectory=traj, run_config=NO_SDK_TRACING)
        assert not traj.ended  # its owner ends it
        traj.success = True

    # The id the first run found is what makes the second run's removal valid.
    assert [(v.call_id, v.step, v.valid) for v in traj.verdicts] == [
        ("c1", 1, True),
        ("c2", 2, True),
    ]
    assert otel.summary().attributes["toolguard.trajectory.length"] == 2
    with pytest.raises(ValueError, match="either trajectory"):
        guarded_run(guard, "x", trajectory=traj)


def test_guarded_run_by_key_is_findable_while_open(otel: Telemetry) -> None:
    guard = otel.guard()
    with guarded_run(guard, "t", key="thread-7", labels={"m": "x"}) as traj:
        assert guard.find_trajectory("thread-7") is traj
    assert guard.find_trajectory("thread-7") is None


class Recorder(AgentHooks[Any]):
    def __init__(self) -> None:
        self.events: list[str] = []

    async def on_start(self, context: Any, agent: Any) -> None:
        self.events.append("start")

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.events.append("llm_end")

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.events.append(f"tool_start {tool.name}")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.events.append(f"tool_end {tool.name}")

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        self.events.append("end")


def test_the_agents_own_hooks_still_hear_every_event(episode: Episode, otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    hooks = Recorder()
    agent, _ = contacts_agent(guard, contacts, SEARCH_THEN_REMOVE, hooks=hooks)

    episode(guard, agent, "remove", "hooks")

    assert hooks.events == [
        "start",
        "llm_end",
        "tool_start search_contact",
        "tool_end search_contact",
        "llm_end",
        "tool_start remove_contact",
        "tool_end remove_contact",
        "llm_end",
        "end",
    ]


def test_the_original_agent_and_tools_are_left_alone(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    tools = contact_tools(contacts)
    original = Agent(name="plain", model=ScriptedModel(SEARCH_THEN_REMOVE), tools=tools)
    invokers = [t.on_invoke_tool for t in tools]

    guarded = guard_agent(original, guard)

    assert original.tools is tools and original.hooks is None
    assert [t.on_invoke_tool for t in tools] == invokers
    assert all(guarded_by(t) is None for t in tools)
    assert all(guarded_by(t) is guard for t in guarded.tools)
    assert guard_agent(guarded, guard).tools == guarded.tools  # guarding twice changes nothing
    with guarded_run(guard, "plain") as traj:
        Runner.run_sync(original, "remove", run_config=NO_SDK_TRACING)
    assert traj.length == 0 and otel.call_spans() == []
    assert contacts == {}  # the unguarded agent ran its tools, unchecked


def test_an_agent_used_as_a_tool_is_one_step(episode: Episode, otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    inner, _ = contacts_agent(guard, contacts, SEARCH_THEN_REMOVE)
    outer_model = ScriptedModel(
        [
            [function_call("contacts_desk", {"input": f"remove {PHONE}"}, call_id="o1")],
            [assistant_message("the desk did it")],
        ]
    )
    desk = inner.as_tool(tool_name="contacts_desk", tool_description="Manages contacts.")
    outer = guard_agent(Agent(name="outer", model=outer_model, tools=[desk]), guard)

    _, traj = episode(guard, outer, "remove the contact", "nested")

    # The outer agent emitted one call; the desk's own calls are checked below it, no steps.
    assert [(v.tool, v.step) for v in traj.verdicts] == [("contacts_desk", 1)]
    assert traj.length == 1 and contacts == {}
    spans = otel.call_spans()
    assert sorted(s.name for s in spans) == [
        "execute_tool contacts_desk",
        "execute_tool remove_contact",
        "execute_tool search_contact",
    ]
    outer_span = next(s for s in spans if s.name == "execute_tool contacts_desk")
    for span in spans:
        if span is not outer_span:
            assert "toolguard.step" not in span.attributes
            assert span.parent is not None and span.parent.span_id == outer_span.context.span_id


def test_user_declared_contracts_are_used_by_name(episode: Episode, otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    guard.declare(
        "remove_contact",
        json_schema={
            "type": "object",
            "properties": {"contact_id": {"type": "string"}},
            "required": ["contact_id"],
        },
        refs={"contact_id": "contact_id"},
    )
    guard.declare(
        "search_contact",
        json_schema={"type": "object", "properties": {"phone": {"type": "string"}}},
        produces={"id": "contact_id"},
    )
    model = ScriptedModel(
        [
            [function_call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c1")],
            [assistant_message("hm")],
        ]
    )
    agent = guard_agent(Agent(name="a", model=model, tools=contact_tools(contacts)), guard)

    _, traj = episode(guard, agent, "remove", "declared")

    # An id guessed right is still not one the agent was given: dependency.
    assert [(v.cause, v.check) for v in traj.verdicts] == [("dependency", "dependency.contact_id")]
    assert contacts


def test_contracts_for_tools_the_agent_lacks_are_an_error(otel: Telemetry) -> None:
    guard = otel.guard()
    agent = Agent(name="a", tools=contact_tools(address_book()))
    with pytest.raises(ValueError, match="remove_contacts"):
        guard_agent(agent, guard, contracts={"remove_contacts": {"refs": {}}})


def test_a_toolspec_contract_gets_the_tools_schema(episode: Episode, otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    spec = tg.ToolSpec(refs={"contact_id": "contact_id"})
    model = ScriptedModel(
        [
            [function_call("remove_contact", {"contact_id": 42}, call_id="c1")],
            [assistant_message("hm")],
        ]
    )
    agent = Agent(name="a", model=model, tools=contact_tools(contacts))
    agent = guard_agent(agent, guard, contracts={"remove_contact": spec})

    _, traj = episode(guard, agent, "remove", "spec")

    assert [v.check for v in traj.verdicts] == ["schema.args"]  # from the SDK's JSON schema
    assert spec.name is None and spec.json_schema is None  # the user's spec is not changed


def test_a_tool_without_arguments(otel: Telemetry) -> None:
    @function_tool
    def ping() -> str:
        """Ping."""
        return "pong"

    guard = otel.guard()
    model = ScriptedModel([[function_call("ping", {}, call_id="p1")], [assistant_message("ok")]])
    agent = guard_agent(Agent(name="a", model=model, tools=[ping]), guard)
    with guarded_run(guard, "ping") as traj:
        Runner.run_sync(agent, "ping", run_config=NO_SDK_TRACING)
    assert [(v.tool, v.valid) for v in traj.verdicts] == [("ping", True)]


def test_a_tool_taking_the_sdks_context_is_not_asked_for_it(otel: Telemetry) -> None:
    """The SDK passes a tool its RunContextWrapper / ToolContext itself (left out of the JSON
    schema the model is shown): the guard never requires it, so the legal call passes."""
    got: list[tuple[str, str]] = []

    @function_tool
    def note(ctx: ToolContext[Any], text: str) -> str:
        """Keep a note."""
        got.append((ctx.tool_call_id, text))
        return "noted"

    @function_tool
    def recall(wrapper: RunContextWrapper[Any]) -> str:
        """The notes."""
        got.append(("recall", type(wrapper).__name__))
        return "notes"

    guard = otel.guard()
    model = ScriptedModel(
        [
            [
                function_call("note", {"text": "hi"}, call_id="n1"),
                function_call("recall", {}, call_id="r1"),
            ],
            [assistant_message("ok")],
        ]
    )
    agent = guard_agent(Agent(name="a", model=model, tools=[note, recall]), guard)
    with guarded_run(guard, "context") as traj:
        Runner.run_sync(agent, "note hi", run_config=NO_SDK_TRACING)
    assert sorted(got) == [("n1", "hi"), ("recall", "ToolContext")]
    assert sorted((v.tool, v.valid) for v in traj.verdicts) == [("note", True), ("recall", True)]
