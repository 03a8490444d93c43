"""The episode boundary: one trajectory per invocation, or the one the user gives; a
session's later turns; concurrent runs; runs that fail or stop half-way."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import toolguard as tg
from conftest import Telemetry, answers, chat, message, scripted
from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.events.event import Event
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner
from google.adk.tools import LongRunningFunctionTool
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.base_tool import BaseTool

from toolguard_google_adk import ToolGuardPlugin


def echo(text: str) -> dict[str, str]:
    """Echo a text."""
    return {"text": text}


def two_calls() -> list[tuple[str, dict[str, str]]]:
    return [("echo", {"text": "a"}), ("echo", {"text": "b"})]


def test_each_invocation_is_a_trajectory_with_labels_and_outcome(otel: Telemetry) -> None:
    guard = otel.guard()
    plugin = ToolGuardPlugin(
        guard,
        labels=lambda ctx: {"agent": ctx.agent.name, "method": "react"},
        success=lambda ctx: True,
    )
    session = chat(LlmAgent(name="helper", model=scripted(two_calls()), tools=[echo]), [plugin])
    events = session.send("say a and b")
    (summary,) = otel.summaries()
    attributes = summary.attributes or {}
    assert attributes["toolguard.trajectory.id"] == events[0].invocation_id  # by default
    assert attributes["toolguard.trajectory.length"] == 2
    assert attributes["toolguard.trajectory.first_error_depth"] == 3
    assert attributes["toolguard.trajectory.success"] is True
    assert attributes["toolguard.label.agent"] == "helper"
    assert attributes["gen_ai.conversation.id"] == session.session_id
    assert len(guard.trajectories) == 0 and plugin._runs == {}  # nothing kept once it ended


def test_the_users_message_is_seen_by_the_information_check(otel: Telemetry) -> None:
    guard = otel.guard()
    model = scripted([("echo", {"text": "ticket-42"}), ("echo", {"text": "ticket-99"})])
    plugin = ToolGuardPlugin(guard, contracts={"echo": {"grounded": ["text"]}})
    with guard.trajectory("grounded") as traj:
        chat(LlmAgent(name="a", model=model, tools=[echo]), [plugin]).send("Close ticket-42")
    assert [(v.step, v.valid, v.cause) for v in sorted(traj.verdicts, key=lambda v: v.step)] == [
        (1, True, None),
        (2, False, "information"),
    ]


CONTRACTS = {
    "search_contacts": {"produces": {"id": "contact_id"}},
    "remove_contact": {"refs": {"contact_id": "contact_id"}},
}


def contacts_agent(removed: list[str]) -> LlmAgent:
    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [{"id": "id_8923", "phone": phone}]

    def remove_contact(contact_id: str) -> dict[str, str]:
        """Remove a contact by id."""
        removed.append(contact_id)
        return {"removed": contact_id}

    # Turn 1 of the chat searches; turn 2 (a new invocation) removes the id it found.
    model = scripted(
        [("search_contacts", {"phone": "+1-555-0199"})],
        "found",
        [("remove_contact", {"contact_id": "id_8923"})],
    )
    return LlmAgent(name="a", model=model, tools=[search_contacts, remove_contact])


@pytest.mark.parametrize("history", [True, False])
def test_a_later_turn_of_the_session_can_use_an_id_an_earlier_turn_found(
    otel: Telemetry, history: bool
) -> None:
    removed: list[str] = []
    plugin = ToolGuardPlugin(otel.guard(), contracts=CONTRACTS, history=history)
    session = chat(contacts_agent(removed), [plugin])
    session.send("Find +1-555-0199")
    events = session.send("Now delete that contact")
    first, second = sorted(otel.summaries(), key=lambda s: s.start_time or 0)
    assert first.attributes["toolguard.trajectory.length"] == 1
    assert second.attributes["toolguard.trajectory.length"] == 1
    if history:
        assert removed == ["id_8923"]
        assert second.attributes["toolguard.trajectory.first_error_depth"] == 2
    else:  # what the earlier turn showed is not known: the legal call is blocked
        assert removed == []
        assert second.attributes["toolguard.trajectory.first_error.cause"] == "dependency"
        answer = answers(events)[0].response
        assert answer is not None and "(dependency)" in answer["error"]


def test_a_given_trajectory_spans_invocations_and_its_owner_ends_it(otel: Telemetry) -> None:
    guard = otel.guard()
    with guard.trajectory("conversation") as traj:
        plugin = ToolGuardPlugin(guard, trajectory=traj)
        session = chat(
            LlmAgent(name="a", model=scripted(two_calls(), "done", two_calls()), tools=[echo]),
            [plugin],
        )
        session.send("first")
        assert not traj.ended
        session.send("second")
        assert traj.length == 4
    assert traj.ended
    (summary,) = otel.summaries()
    assert summary.attributes["toolguard.trajectory.id"] == "conversation"


def test_concurrent_runs_keep_their_own_trajectories(otel: Telemetry) -> None:
    guard = otel.guard()
    plugin = ToolGuardPlugin(guard)
    agent = LlmAgent(name="a", model=scripted(two_calls()), tools=[echo])
    one, two = chat(agent, [plugin]), chat(agent, [plugin])

    async def both() -> None:
        await asyncio.gather(one.asend("one"), two.asend("two"))

    asyncio.run(both())
    summaries = otel.summaries()
    assert sorted(s.attributes["toolguard.trajectory.length"] for s in summaries) == [2, 2]
    by_trajectory: dict[str, list[int]] = {}
    for span in otel.call_spans():
        trajectory_id = str(span.attributes["toolguard.trajectory.id"])
        by_trajectory.setdefault(trajectory_id, []).append(int(span.attributes["toolguard.step"]))
    assert sorted(map(sorted, by_trajectory.values())) == [[1, 2], [1, 2]]


def test_a_cancelled_run_is_ended_when_the_runner_closes(otel: Telemetry) -> None:
    # A cancelled invocation gets neither ADK's after-run nor its run-error callback.
    started = asyncio.Event()

    async def hang(text: str) -> dict[str, str]:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return {"text": text}

    plugin = ToolGuardPlugin(otel.guard(), trajectory_id=lambda ctx: "cancelled")
    model = scripted([("echo", {"text": "a"})], [("hang", {"text": "b"})])
    session = chat(LlmAgent(name="a", model=model, tools=[echo, hang]), [plugin])

    async def cancel_then_close() -> None:
        task = asyncio.ensure_future(session.asend("go"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert otel.summaries() == []  # still open
        await session.runner.close()

    asyncio.run(cancel_then_close())
    summary = otel.summary("cancelled").attributes
    assert summary["toolguard.trajectory.length"] == 2
    assert "toolguard.trajectory.success" not in summary
    hung = [s for s in otel.call_spans() if s.attributes["gen_ai.tool.name"] == "hang"]
    assert [s.attributes["toolguard.decision"] for s in hung] == ["cancelled"]


def decisions(otel: Telemetry) -> list[tuple[int, str]]:
    """(step, decision) of every call span, by step."""
    return sorted(
        (int(s.attributes["toolguard.step"]), str(s.attributes["toolguard.decision"]))
        for s in otel.call_spans()
    )


def test_a_run_abandoned_at_the_models_turn_ends_its_reserved_calls_cancelled(
    otel: Telemetry,
) -> None:
    # The app stops reading at the event carrying the turn's calls: none of them ever
    # reaches a tool callback, yet their steps were reserved (they count in T).
    plugin = ToolGuardPlugin(otel.guard(), trajectory_id=lambda ctx: "abandoned")
    turn = [("echo", {"text": "a"}), ("echo", {})]  # the second misses its argument
    session = chat(LlmAgent(name="a", model=scripted(turn, ids=True), tools=[echo]), [plugin])

    async def abandon_then_close() -> None:
        events = session.runner.run_async(
            user_id=session.user_id, session_id=session.session_id, new_message=message("go")
        )
        async for event in events:
            if event.get_function_calls():
                break
        await events.aclose()
        await session.runner.close()
        await session.runner.close()  # closed twice: still one verdict per call

    asyncio.run(abandon_then_close())
    assert otel.summary("abandoned").attributes["toolguard.trajectory.length"] == 2
    # Each is checked first: the call the guard would block is recorded blocked.
    assert decisions(otel) == [(1, "cancelled"), (2, "blocked")]


def test_a_lone_call_abandoned_at_the_models_turn_counts_in_t(otel: Telemetry) -> None:
    plugin = ToolGuardPlugin(otel.guard(), trajectory_id=lambda ctx: "abandoned")
    model = scripted([("echo", {"text": "a"})])
    session = chat(LlmAgent(name="a", model=model, tools=[echo]), [plugin])

    async def abandon_then_close() -> None:
        events = session.runner.run_async(
            user_id=session.user_id, session_id=session.session_id, new_message=message("go")
        )
        async for event in events:
            if event.get_function_calls():
                break
        await events.aclose()
        await session.runner.close()

    asyncio.run(abandon_then_close())
    assert otel.summary("abandoned").attributes["toolguard.trajectory.length"] == 1
    assert decisions(otel) == [(1, "cancelled")]


class Gate(BasePlugin):
    """A plugin whose before-tool callback holds one tool's calls (an approval that never
    comes): ahead of the guard, they never reach it; after it, they were checked but never
    run."""

    def __init__(self, name: str, held: str) -> None:
        super().__init__(name)
        self.held = held
        self.parked = asyncio.Event()

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: Any
    ) -> None:
        if tool.name == self.held:
            self.parked.set()
            await asyncio.Event().wait()
        return None


def test_a_run_cancelled_mid_turn_ends_each_call_once(otel: Telemetry) -> None:
    def other(text: str) -> dict[str, str]:
        """Held after the guard's check."""
        return {"text": text}

    ahead, behind = Gate("ahead", held="echo"), Gate("behind", held="other")
    plugin = ToolGuardPlugin(otel.guard(), trajectory_id=lambda ctx: "cancelled")
    model = scripted([("other", {"text": "a"}), ("echo", {"text": "b"})])
    agent = LlmAgent(name="a", model=model, tools=[echo, other])
    session = chat(agent, [ahead, plugin, behind])

    async def cancel_then_close() -> None:
        task = asyncio.ensure_future(session.asend("go"))
        await ahead.parked.wait()
        await behind.parked.wait()
        task.cancel()  # raised in the gates' callbacks: ADK runs no tool callback after
        with pytest.raises(asyncio.CancelledError):
            await task
        await session.runner.close()

    asyncio.run(cancel_then_close())
    assert otel.summary("cancelled").attributes["toolguard.trajectory.length"] == 2
    # other was checked and never answered; echo never reached the guard.
    assert decisions(otel) == [(1, "cancelled"), (2, "cancelled")]
    # ADK ended its span of other when the task was cancelled, long before the runner
    # closed: that span carries nothing of the guard's, and the guard's own span of the call
    # its verdict (one span per call, each with its decision).
    (adks,) = [
        s
        for s in otel.tool_spans()
        if s.instrumentation_scope.name != "toolguard"
        and s.attributes["gen_ai.tool.name"] == "other"
    ]
    assert not any(key.startswith("toolguard.") for key in adks.attributes)


def test_a_sub_agents_calls_cancelled_with_its_caller_are_in_the_callers_summary(
    otel: Telemetry,
) -> None:
    # An AgentTool's agent runs in a runner of its own; cancelled with its caller, neither
    # run gets an after-run callback: both end when the runner closes, the sub-agent's
    # calls (steps of the caller's trajectory) before the caller's summary.
    def other(text: str) -> dict[str, str]:
        """Held after the guard's check."""
        return {"text": text}

    helper = LlmAgent(
        name="helper",
        description="does things",
        model=scripted([("other", {"text": "a"}), ("echo", {"text": "b"})]),
        tools=[other, echo],
    )
    root = LlmAgent(
        name="root",
        model=scripted([("helper", {"request": "go"})]),
        tools=[AgentTool(agent=helper)],
    )
    behind = Gate("behind", held="other")
    guard = otel.guard()
    traj = guard.trajectory("nested")  # not started: the plugin starts and ends it
    session = chat(root, [ToolGuardPlugin(guard, trajectory=traj), behind])

    async def cancel_then_close() -> None:
        task = asyncio.ensure_future(session.asend("go"))
        await behind.parked.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await session.runner.close()

    asyncio.run(cancel_then_close())
    assert traj.ended and traj.length == 3
    assert sorted((v.step, v.tool, v.decision) for v in traj.verdicts) == [
        (1, "helper", "cancelled"),
        (2, "other", "cancelled"),
        (3, "echo", "allowed"),
    ]


def test_a_run_aborted_mid_turn_ends_each_call_cancelled_before_its_summary(
    otel: Telemetry,
) -> None:
    # run_async(abort_signal=...): ADK cancels the turn, answers the calls left unanswered
    # with an error of its own (INVOCATION_ABORTED) and runs the after-run callback.
    def other(text: str) -> dict[str, str]:
        """Held after the guard's check."""
        return {"text": text}

    ahead, behind = Gate("ahead", held="echo"), Gate("behind", held="other")
    guard = otel.guard()
    traj = guard.trajectory("aborted")  # not started: the plugin starts and ends it
    plugin = ToolGuardPlugin(guard, trajectory=traj)
    model = scripted([("other", {"text": "a"}), ("echo", {"text": "b"})])
    session = chat(LlmAgent(name="a", model=model, tools=[echo, other]), [ahead, plugin, behind])
    stop = asyncio.Event()

    async def read() -> list[Event]:
        events = session.runner.run_async(
            user_id=session.user_id,
            session_id=session.session_id,
            new_message=message("go"),
            abort_signal=stop,
        )
        return [e async for e in events]

    async def abort() -> list[Event]:
        task = asyncio.ensure_future(read())
        await ahead.parked.wait()
        await behind.parked.wait()
        stop.set()
        return await task

    events = asyncio.run(abort())
    sealed = [r.response for e in events if e.error_code for r in e.get_function_responses()]
    assert sealed and all("aborted" in str(r) for r in sealed)  # ADK's answer, no tool's
    assert traj.ended  # by the after-run callback, with every verdict in the summary
    assert sorted((v.step, v.decision) for v in traj.verdicts) == [
        (1, "cancelled"),
        (2, "cancelled"),
    ]
    assert decisions(otel) == [(1, "cancelled"), (2, "cancelled")]


def test_a_run_that_finishes_writes_one_span_per_call(otel: Telemetry) -> None:
    plugin = ToolGuardPlugin(otel.guard(), trajectory_id=lambda ctx: "finished")
    session = chat(LlmAgent(name="a", model=scripted(two_calls()), tools=[echo]), [plugin])
    session.send("go")
    asyncio.run(session.runner.close())
    assert otel.summary("finished").attributes["toolguard.trajectory.length"] == 2
    assert decisions(otel) == [(1, "allowed"), (2, "allowed")]


def test_a_call_another_plugin_answers_keeps_its_step_without_a_verdict(
    otel: Telemetry,
) -> None:
    class Answer(BasePlugin):  # ahead of the guard: answers hang's calls itself
        async def before_tool_callback(
            self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: Any
        ) -> dict[str, str] | None:
            return {"text": "answered"} if tool.name == "hang" else None

    def hang(text: str) -> dict[str, str]:
        """Answered by the other plugin."""
        raise AssertionError("never runs")

    plugin = ToolGuardPlugin(otel.guard(), trajectory_id=lambda ctx: "answered")
    model = scripted([("hang", {"text": "a"}), ("echo", {"text": "b"})])
    session = chat(LlmAgent(name="a", model=model, tools=[echo, hang]), [Answer("a"), plugin])
    session.send("go")
    asyncio.run(session.runner.close())
    assert otel.summary("answered").attributes["toolguard.trajectory.length"] == 2
    assert decisions(otel) == [(2, "allowed")]  # the README's limit: not cancelled


def test_at_interpreter_exit_open_trajectories_write_their_summary() -> None:
    # exit_script.py cancels an invocation while a tool runs (no after-run callback) and
    # never closes the runner. Its spans go to stdout.
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
    summaries = [line for line in out.splitlines() if line.startswith("toolguard.trajectory ")]
    assert len(summaries) == 1, out
    assert "'toolguard.trajectory.id': 'left-open'" in summaries[0]
    assert "'toolguard.trajectory.length': 1" in summaries[0]


def test_options_are_checked() -> None:
    guard = tg.Guard()
    with pytest.raises(ValueError, match="tool_errors"):
        ToolGuardPlugin(guard, tool_errors="swallow")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"toolguard\.Guard"):
        ToolGuardPlugin(object())  # type: ignore[arg-type]


def test_a_contract_naming_no_argument_fails_loudly(otel: Telemetry) -> None:
    plugin = ToolGuardPlugin(otel.guard(), contracts={"echo": {"refs": {"txt": "kind"}}})
    session = chat(LlmAgent(name="a", model=scripted(two_calls()), tools=[echo]), [plugin])
    with pytest.raises(Exception) as raised:
        session.send("go")
    chain = [raised.value, *getattr(raised.value, "exceptions", ()), raised.value.__cause__]
    assert any(isinstance(e, tg.ToolDefinitionError) and "txt" in str(e) for e in chain if e), chain


def test_without_adk_the_error_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['google.adk'] = None\n"
        "import toolguard_google_adk\n"
        "try:\n"
        "    toolguard_google_adk.ToolGuardPlugin\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "google-adk>=2.13,<3" in out
    assert "pip install -e . -e adapters/google_adk" in out


def test_a_call_another_plugin_answers_after_it_ran_has_that_answer_as_its_result(
    otel: Telemetry,
) -> None:
    class Answer(BasePlugin):  # ahead of the guard: answers echo's calls after they ran
        async def after_tool_callback(
            self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: Any, result: Any
        ) -> dict[str, str]:
            return {"error": "withheld"}  # ADK then runs no later plugin's after callback

    plugin = ToolGuardPlugin(otel.guard(), trajectory_id=lambda ctx: "answered-after")
    model = scripted([("echo", {"text": "a"})])
    session = chat(LlmAgent(name="a", model=model, tools=[echo]), [Answer("a"), plugin])
    assert [r.response for r in answers(session.send("go"))] == [{"error": "withheld"}]
    # The call ran and the model got an error: recorded so, in the run's summary.
    summary = otel.summary("answered-after").attributes
    assert summary["toolguard.trajectory.length"] == 1
    assert summary["toolguard.trajectory.first_error_depth"] == 1
    assert summary["toolguard.trajectory.first_error.cause"] == "state_consistency"
    assert decisions(otel) == [(1, "allowed")]


def test_a_call_left_without_an_answer_is_cancelled_in_the_runs_summary(
    otel: Telemetry,
) -> None:
    # A long-running tool answered with nothing: ADK sends no answer now (the client sends
    # it later), and a plugin ahead of the guard answering so stops ADK's after callbacks.
    class Defer(BasePlugin):
        async def after_tool_callback(
            self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: Any, result: Any
        ) -> dict[str, str]:
            return {}

    def ask(text: str) -> None:
        """Ask a person; they answer later."""

    guard = otel.guard()
    traj = guard.trajectory("deferred")  # not started: the plugin starts and ends it
    plugin = ToolGuardPlugin(guard, trajectory=traj)
    tool = LongRunningFunctionTool(ask)
    session = chat(
        LlmAgent(name="a", model=scripted([("ask", {"text": "a"})]), tools=[tool]),
        [Defer("a"), plugin],
    )
    session.send("go")
    # Ended with the run, before its summary: not when the call is garbage-collected.
    assert traj.ended and otel.summary("deferred").attributes["toolguard.trajectory.length"] == 1
    assert [v.decision for v in traj.verdicts] == ["cancelled"]
    assert decisions(otel) == [(1, "cancelled")]


def test_a_resumed_invocation_ends_its_interrupted_run_and_is_a_trajectory_of_its_own(
    otel: Telemetry,
) -> None:
    # A resumable app: a run cancelled mid-call is resumed by run_async(invocation_id=...)
    # without a message; ADK runs the interrupted call again under the same invocation id.
    started, hold = asyncio.Event(), [True]

    async def hang(text: str) -> dict[str, str]:
        """Hangs the first time it runs."""
        if hold[0]:
            started.set()
            await asyncio.Event().wait()
        return {"text": text}

    model = scripted([("echo", {"text": "a"})], [("hang", {"text": "b"})], "done")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ADK: resumability is experimental
        resumable = ResumabilityConfig(is_resumable=True)
    app = App(
        name="app",
        root_agent=LlmAgent(name="a", model=model, tools=[echo, hang]),
        plugins=[ToolGuardPlugin(otel.guard())],
        resumability_config=resumable,
    )
    runner = InMemoryRunner(app=app)

    async def cancel_resume_close() -> str:
        session = await runner.session_service.create_session(app_name="app", user_id="u")
        seen: list[str] = []

        async def first() -> None:
            async for event in runner.run_async(
                user_id="u", session_id=session.id, new_message=message("go")
            ):
                seen.append(event.invocation_id)

        task = asyncio.ensure_future(first())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        hold[0] = False
        async for _ in runner.run_async(user_id="u", session_id=session.id, invocation_id=seen[0]):
            pass
        await runner.close()
        return seen[0]

    invocation = asyncio.run(cancel_resume_close())
    summaries = {
        str(s.attributes["toolguard.trajectory.id"]): s.attributes["toolguard.trajectory.length"]
        for s in otel.summaries()
    }
    # The interrupted run's summary is out (T=2), and the resumed run, which ran hang again,
    # is a trajectory of its own: never one id holding both runs' steps.
    assert len(summaries) == 2 and summaries.pop(invocation) == 2
    ((resumed, length),) = summaries.items()
    assert resumed.startswith(f"{invocation}+") and length == 1
    by_run = sorted(
        (
            s.attributes["toolguard.trajectory.id"] == invocation,
            int(s.attributes["toolguard.step"]),
            str(s.attributes["gen_ai.tool.name"]),
            str(s.attributes["toolguard.decision"]),
        )
        for s in otel.call_spans()
    )
    assert by_run == [
        (False, 1, "hang", "allowed"),
        (True, 1, "echo", "allowed"),
        (True, 2, "hang", "cancelled"),
    ]


class Behind(BasePlugin):
    """A plugin after the guard: its before-tool callback fails one tool's calls, or holds
    them (an approval that never comes); either way no tool callback of the guard's follows."""

    def __init__(self, tool: str, how: str) -> None:
        super().__init__("behind")
        self.tool, self.how = tool, how
        self.parked = asyncio.Event()

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: Any
    ) -> None:
        if tool.name == self.tool:
            if self.how == "fail":
                raise RuntimeError("a plugin failed")
            self.parked.set()
            await asyncio.Event().wait()
        return None


class AnswerAhead(BasePlugin):
    """A plugin ahead of the guard that answers one tool's calls in its after-tool callback:
    ADK asks no later plugin."""

    def __init__(self, tool: str) -> None:
        super().__init__("ahead")
        self.tool = tool

    async def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: Any, result: Any
    ) -> dict[str, Any] | None:
        return {"text": "answered ahead"} if tool.name == self.tool else None


@pytest.mark.parametrize("end", ["errors", "is cancelled", "ends"])
def test_a_call_after_the_runner_closed_ends_cancelled_before_the_summary(
    otel: Telemetry, end: str
) -> None:
    # The runner closes (a server shutting down) while an invocation still runs: its run is
    # ended, so the next turn's call is checked outside any run this plugin knows. Its
    # invocation then errors, is cancelled or ends without a tool callback of the guard's
    # for that call: it still ends, cancelled, before the trajectory's summary.
    held, release = asyncio.Event(), asyncio.Event()

    async def hold(text: str) -> dict[str, str]:
        """Wait for a release."""
        held.set()
        await release.wait()
        return {"text": text}

    guard = otel.guard()
    plugin = ToolGuardPlugin(guard)
    plugins: list[BasePlugin] = [plugin]
    if end == "ends":
        plugins.insert(0, AnswerAhead("echo"))
    else:
        plugins.append(Behind("echo", "fail" if end == "errors" else "hold"))
    model = scripted([("hold", {"text": "a"})], [("echo", {"text": "b"})])
    session = chat(LlmAgent(name="a", model=model, tools=[hold, echo]), plugins)

    async def close_mid_run() -> tg.Trajectory:
        with guard.trajectory("closed") as traj:
            task = asyncio.ensure_future(session.asend("go"))
            await held.wait()
            await session.runner.close()
            release.set()
            if end == "is cancelled":
                behind = plugins[-1]
                assert isinstance(behind, Behind)
                await behind.parked.wait()
                task.cancel()
            if end == "ends":
                await task
            else:
                failed = RuntimeError if end == "errors" else asyncio.CancelledError
                with pytest.raises(failed):
                    await task
            if end == "is cancelled":
                await session.runner.close()  # ADK runs no callback for a cancelled run
        return traj

    traj = asyncio.run(close_mid_run())
    assert traj.length == 2
    assert sorted((v.step, v.tool, v.decision) for v in traj.verdicts) == [
        (1, "hold", "cancelled"),
        (2, "echo", "cancelled"),
    ]
    summary = otel.summary("closed")
    (echoed,) = [s for s in otel.call_spans() if s.attributes["gen_ai.tool.name"] == "echo"]
    assert echoed.attributes["toolguard.decision"] == "cancelled"
    assert echoed.end_time is not None and summary.end_time is not None
    assert otel.spans().index(echoed) < otel.spans().index(summary)
    assert len(plugin._orphans) == 0  # nothing kept once its invocation ended
