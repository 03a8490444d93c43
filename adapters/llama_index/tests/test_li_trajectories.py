"""The episode boundary: one trajectory per run, or the one the user gives; a conversation's
later runs; concurrent runs; a run that fails; LlamaIndex's own instrumentation on."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toolguard as tg
from conftest import Telemetry, run, scripted
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import Memory

from toolguard_llama_index import GuardedFunctionTool, guard_agent


def echo(text: str) -> dict[str, str]:
    """Echo a text."""
    return {"text": text}


def two_calls() -> list[tuple[str, dict[str, str]]]:
    return [("echo", {"text": "a"}), ("echo", {"text": "b"})]


def test_each_run_is_a_trajectory_with_labels_and_outcome(otel: Telemetry) -> None:
    guard = otel.guard()
    agent = guard_agent(
        FunctionAgent(tools=[echo], llm=scripted(two_calls())),
        guard,
        labels={"model": "scripted", "method": "react"},
        success=lambda result: str(result) == "done",
    )
    run(agent, "say a and b")
    (summary,) = otel.summaries()
    attributes = summary.attributes or {}
    assert attributes["toolguard.trajectory.length"] == 2
    assert attributes["toolguard.trajectory.first_error_depth"] == 3
    assert attributes["toolguard.trajectory.success"] is True
    assert attributes["toolguard.label.method"] == "react"
    # The call spans are children of the summary span.
    for span in otel.call_spans():
        assert span.parent is not None and span.parent.span_id == summary.context.span_id


def test_the_users_message_is_seen_by_the_information_check(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted([("echo", {"text": "ticket-42"}), ("echo", {"text": "ticket-99"})])
    agent = guard_agent(
        FunctionAgent(tools=[echo], llm=model), guard, contracts={"echo": {"grounded": ["text"]}}
    )
    with guard.trajectory("grounded") as traj:
        run(agent, "Close ticket-42")
    assert sorted((v.step, v.valid, v.cause) for v in traj.verdicts) == [
        (1, True, None),
        (2, False, "information"),
    ]


def contacts_agent(removed: list[str]) -> FunctionAgent:
    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [{"id": "id_8923", "phone": phone}]

    def remove_contact(contact_id: str) -> dict[str, str]:
        """Remove a contact by id."""
        removed.append(contact_id)
        return {"removed": contact_id}

    # Run 1 searches; run 2, in the same conversation, removes the id run 1 found.
    model = scripted(
        [("search_contacts", {"phone": "+1-555-0199"})],
        "found it",
        [("remove_contact", {"contact_id": "id_8923"})],
    )
    return FunctionAgent(tools=[search_contacts, remove_contact], llm=model)


CONTRACTS = {
    "search_contacts": {"produces": {"id": "contact_id"}},
    "remove_contact": {"refs": {"contact_id": "contact_id"}},
}


@pytest.mark.parametrize("history", [True, False])
def test_a_later_run_of_the_conversation_can_use_an_id_an_earlier_run_found(
    otel: Telemetry, history: bool
) -> None:
    removed: list[str] = []
    agent = guard_agent(contacts_agent(removed), otel.guard(), contracts=CONTRACTS, history=history)

    async def chat() -> None:
        memory = Memory.from_defaults(session_id="chat-1")  # the conversation's history
        await agent.run("Find +1-555-0199", memory=memory)
        await agent.run("Now delete that contact", memory=memory)

    asyncio.run(chat())
    first, second = sorted(otel.summaries(), key=lambda s: s.start_time or 0)
    assert first.attributes["toolguard.trajectory.length"] == 1
    assert second.attributes["toolguard.trajectory.length"] == 1
    if history:
        assert removed == ["id_8923"]
        assert second.attributes["toolguard.trajectory.first_error_depth"] == 2
    else:  # what the earlier run showed is not known: the legal call is blocked
        assert removed == []
        assert second.attributes["toolguard.trajectory.first_error.cause"] == "dependency"


def test_a_given_trajectory_spans_runs_and_its_owner_ends_it(otel: Telemetry) -> None:
    guard = otel.guard()
    with guard.trajectory("conversation") as traj:
        agent = guard_agent(
            FunctionAgent(tools=[echo], llm=scripted(two_calls())), guard, trajectory=traj
        )
        run(agent, "first")
        assert not traj.ended
        run(agent, "second")
        assert traj.length == 4
    assert traj.ended
    (summary,) = otel.summaries()
    assert summary.attributes["toolguard.trajectory.id"] == "conversation"


def test_concurrent_runs_keep_their_own_trajectories(otel: Telemetry) -> None:
    guard = otel.guard()
    agent = guard_agent(FunctionAgent(tools=[echo], llm=scripted(two_calls())), guard)

    async def both() -> None:
        await asyncio.gather(agent.run("one"), agent.run("two"))

    asyncio.run(both())
    assert sorted(s.attributes["toolguard.trajectory.length"] for s in otel.summaries()) == [2, 2]
    by_trajectory: dict[str, list[int]] = {}
    for span in otel.call_spans():
        trajectory_id = str(span.attributes["toolguard.trajectory.id"])
        by_trajectory.setdefault(trajectory_id, []).append(int(span.attributes["toolguard.step"]))
    assert sorted(map(sorted, by_trajectory.values())) == [[1, 2], [1, 2]]


def test_a_failed_run_still_writes_its_summary(otel: Telemetry) -> None:
    def broken(messages: Any, **kwargs: Any) -> ChatMessage:
        if any(m.role.value == "tool" for m in messages):
            raise ConnectionError("the model went away")
        return scripted(two_calls())._get_response_generator()(messages, **kwargs)

    guard = otel.guard()
    model = scripted()
    model.response_generator = broken
    agent = guard_agent(
        FunctionAgent(tools=[echo], llm=model), guard, trajectory_id=lambda: "failed"
    )
    with pytest.raises(Exception, match="the model went away"):
        run(agent, "go")
    (summary,) = otel.summaries()
    assert summary.attributes["toolguard.trajectory.id"] == "failed"
    assert summary.attributes["toolguard.trajectory.length"] == 2
    assert "toolguard.trajectory.success" not in summary.attributes
    assert not summary.status.is_ok


def test_a_run_the_process_leaves_mid_way_writes_its_summary_at_exit() -> None:
    # exit_script.py exits while its run waits in a tool (the handler never completes); its
    # spans go to stdout.
    here = Path(__file__).resolve().parent
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run(
        [sys.executable, str(here / "exit_script.py")],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert "exiting mid-run" in out
    summaries = [line for line in out.splitlines() if line.startswith("toolguard.trajectory ")]
    assert len(summaries) == 1, out
    assert "'toolguard.trajectory.id': 'left-open'" in summaries[0]
    assert "'toolguard.trajectory.length': 1" in summaries[0]
    assert "'toolguard.label.model': 'm'" in summaries[0]
    assert "toolguard.trajectory.success" not in summaries[0]  # unknown, not False


def test_with_llamaindexs_instrumentation_on(otel: Telemetry) -> None:
    # LlamaIndex's own tracing (its instrumentation dispatcher, with a span handler) is not
    # OpenTelemetry: the guard's span is the call's only execute_tool span.
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    handler = SimpleSpanHandler()
    dispatcher = get_dispatcher()
    dispatcher.add_span_handler(handler)
    try:
        guard = otel.guard()
        agent = guard_agent(FunctionAgent(tools=[echo], llm=scripted(two_calls())), guard)
        run(agent, "go")
    finally:
        dispatcher.span_handlers.remove(handler)
    assert handler.completed_spans  # LlamaIndex traced the run
    tool_spans = [s for s in otel.spans() if s.name.startswith("execute_tool ")]
    assert len(tool_spans) == 2 and len(otel.call_spans()) == 2


def test_options_are_checked() -> None:
    guard = tg.Guard()
    agent = FunctionAgent(tools=[echo], llm=scripted())
    with pytest.raises(ValueError, match="tool_errors"):
        guard_agent(agent, guard, tool_errors="swallow")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"toolguard\.Guard"):
        guard_agent(agent, object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="workflow agent"):
        guard_agent(object(), guard)  # type: ignore[type-var]


def test_a_contract_naming_no_argument_fails_loudly() -> None:
    agent = FunctionAgent(tools=[echo], llm=scripted())
    with pytest.raises(tg.ToolDefinitionError, match="txt"):
        guard_agent(agent, tg.Guard(), contracts={"echo": {"refs": {"txt": "kind"}}})


def test_a_contract_for_a_tool_the_agent_does_not_have_fails_loudly() -> None:
    # A typo in the tool's name: its contract would be ignored and the tool run unguarded.
    agent = FunctionAgent(tools=[echo], llm=scripted())
    guard = tg.Guard()
    with pytest.raises(
        tg.ToolDefinitionError,
        match=r"contracts name tools the agent does not have: ecko \(the agent's tools: echo\)",
    ):
        guard_agent(agent, guard, contracts={"ecko": {"grounded": ["text"]}})
    # Nothing changed: no tool declared, none guarded.
    assert not guard.has_tool("echo")
    assert not isinstance(agent.tools[0], GuardedFunctionTool)


def test_an_agent_workflows_contracts_may_name_any_of_its_agents_tools(otel: Telemetry) -> None:
    def lookup(key: str) -> dict[str, str]:
        """Look a key up."""
        return {"id": key}

    front = FunctionAgent(name="front", description="Echoes.", tools=[echo], llm=scripted())
    back = FunctionAgent(name="back", description="Looks up.", tools=[lookup], llm=scripted())
    guard = otel.guard()
    guard_agent(
        AgentWorkflow(agents=[front, back], root_agent="front"),
        guard,
        contracts={"lookup": {"grounded": ["key"]}},
    )
    assert guard.get_tool("lookup").spec.grounded == ["key"]


def test_a_misspelled_option_names_the_tool() -> None:
    agent = FunctionAgent(tools=[echo], llm=scripted())
    with pytest.raises(
        tg.ToolDefinitionError, match=r"^tool 'echo': unknown tool option\(s\) ref;"
    ):
        guard_agent(agent, tg.Guard(), contracts={"echo": {"ref": {"text": "kind"}}})


def test_guarding_twice_guards_once(otel: Telemetry) -> None:
    guard = otel.guard()
    agent = guard_agent(FunctionAgent(tools=[echo], llm=scripted(two_calls())), guard)
    assert guard_agent(agent, guard) is agent
    with guard.trajectory("once") as traj:
        run(agent, "go")
    assert traj.length == 2


def test_without_llamaindex_the_error_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['llama_index.core'] = None\n"
        "import toolguard_llama_index\n"
        "try:\n"
        "    toolguard_llama_index.guard_agent\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "llama-index-core>=0.14.25,<0.15" in out
    assert "pip install -e . -e adapters/llama_index" in out


def test_an_id_removed_in_an_earlier_run_stays_removed_in_one_trajectory(
    otel: Telemetry,
) -> None:
    # One trajectory for the whole conversation: the later run replays the earlier results
    # (the search's id), which must not bring back the id the remove invalidated.
    contacts = {"id_8923": {"id": "id_8923", "phone": "+1"}}

    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [c for c in contacts.values() if c["phone"] == phone]

    def remove_contact(contact_id: str) -> dict[str, str]:
        """Remove a contact by id."""
        contacts.pop(contact_id, None)
        return {"removed": contact_id}

    remove = [("remove_contact", {"contact_id": "id_8923"})]
    model = scripted([("search_contacts", {"phone": "+1"})], remove, "removed", remove)
    guard = otel.guard()
    with guard.trajectory("whole-chat") as traj:
        agent = guard_agent(
            FunctionAgent(tools=[search_contacts, remove_contact], llm=model),
            guard,
            trajectory=traj,
            contracts={
                "search_contacts": CONTRACTS["search_contacts"],
                "remove_contact": {
                    "refs": {"contact_id": "contact_id"},
                    "invalidates": {"contact_id": "contact_id"},
                },
            },
        )

        async def chat() -> None:
            memory = Memory.from_defaults(session_id="chat-2")
            await agent.run("Remove +1", memory=memory)
            await agent.run("Remove it again", memory=memory)

        asyncio.run(chat())
    assert sorted((v.step, v.tool, v.valid, v.cause) for v in traj.verdicts) == [
        (1, "search_contacts", True, None),
        (2, "remove_contact", True, None),
        (3, "remove_contact", False, "dependency"),
    ]
