"""Calls through the capability: parallel turns, tools that raise, log mode, the framework's
own rejections, and how a rejection reaches the model. Each runs sync and async."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import toolguard as tg
from conftest import Telemetry, returns, scripted
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import ValidatedToolArgs, WrapToolExecuteHandler
from pydantic_ai.exceptions import ToolFailed, UnexpectedModelBehavior
from pydantic_ai.messages import ModelRequest, ToolCallPart
from pydantic_ai.tools import ToolDefinition

from toolguard_pydantic_ai import ToolGuard

Runner = Callable[[Agent[None, str], str], Any]


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Runner:
    if request.param == "sync":
        return lambda agent, prompt: agent.run_sync(prompt)
    return lambda agent, prompt: asyncio.run(agent.run(prompt))


def by_call_id(traj: tg.Trajectory) -> dict[str | None, tg.Verdict]:
    return {v.call_id: v for v in traj.verdicts}


# -- parallel calls -----------------------------------------------------------------------------
class HoldUntilLaterCallsRan(AbstractCapability[Any]):
    """Lets a turn's calls reach the guard in reverse emission order: each waits (on an
    event, not a sleep) until the call emitted after it has finished."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.done: dict[str, asyncio.Event] = {}
        self.finished: list[str] = []

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        events = self.done or {i: asyncio.Event() for i in self.ids}
        self.done = events
        index = self.ids.index(call.tool_call_id)
        if index + 1 < len(self.ids):
            await events[self.ids[index + 1]].wait()
        try:
            return await handler(args)
        finally:
            self.finished.append(call.tool_call_id)
            events[call.tool_call_id].set()


def test_parallel_calls_take_steps_in_emission_order(otel: Telemetry, run: Runner) -> None:
    guard = otel.guard()
    ids = ["p1", "p2", "p3"]
    hold = HoldUntilLaterCallsRan(ids)

    async def lookup(key: str) -> str:
        return key.upper()

    model = scripted([ToolCallPart("lookup", {"key": k}, tool_call_id=k) for k in ids])
    traj = guard.trajectory("parallel")
    # Listed first, so it wraps the guard: the guard sees the calls in the order it lets them go.
    agent = Agent(model, tools=[lookup], capabilities=[hold, ToolGuard(guard, trajectory=traj)])
    run(agent, "look up three keys")

    assert hold.finished == ["p3", "p2", "p1"]  # the framework ran them backwards
    assert [v.call_id for v in traj.verdicts] == ["p3", "p2", "p1"]
    assert {i: v.step for i, v in by_call_id(traj).items()} == {"p1": 1, "p2": 2, "p3": 3}
    assert (traj.length, traj.first_error_depth, traj.ended) == (3, 4, True)
    steps = {s.attributes["gen_ai.tool.call.id"]: s.attributes["toolguard.step"]
             for s in otel.call_spans()}  # fmt: skip
    assert steps == {"p1": 1, "p2": 2, "p3": 3}


# -- a tool that raises ---------------------------------------------------------------------------
def failing_agent(guard: tg.Guard, **options: Any) -> tuple[Agent[None, str], list[Any]]:
    seen: list[Any] = []

    def transfer(amount: int) -> str:
        raise RuntimeError("insufficient funds")

    def read_answer(request: ModelRequest) -> list[Any]:
        seen.append(returns(request)["t1"])
        return []  # then "done"

    model = scripted([ToolCallPart("transfer", {"amount": 5}, tool_call_id="t1")], read_answer)
    return Agent(model, tools=[transfer], capabilities=[ToolGuard(guard, **options)]), seen


def test_a_tool_that_raises_is_a_state_consistency_failure_delivered_to_the_model(
    otel: Telemetry, run: Runner
) -> None:
    guard = otel.guard()
    agent, seen = failing_agent(guard)
    with guard.trajectory("raises") as traj:
        run(agent, "pay")
    (verdict,) = traj.verdicts
    assert (verdict.decision, verdict.cause, verdict.check) == (
        "allowed", "state_consistency", "state.exception")  # fmt: skip
    assert (traj.length, traj.first_error_depth) == (1, 1)
    (answer,) = seen
    assert answer.outcome == "failed"
    assert "RuntimeError: insufficient funds" in answer.content
    (span,) = otel.call_spans()
    assert span.attributes["toolguard.cause"] == "state_consistency"


def test_tool_errors_raise_keeps_pydantic_ais_behaviour(otel: Telemetry, run: Runner) -> None:
    guard = otel.guard()
    agent, seen = failing_agent(guard, tool_errors="raise")
    with guard.trajectory("raises") as traj, pytest.raises(RuntimeError, match="insufficient"):
        run(agent, "pay")
    assert seen == []
    (verdict,) = traj.verdicts
    assert verdict.check == "state.exception"


# -- log mode -------------------------------------------------------------------------------------
def test_log_mode_runs_the_invalid_call_and_records_it(otel: Telemetry, run: Runner) -> None:
    guard = otel.guard(mode="log")
    removed: list[str] = []

    def remove_contact(contact_id: str) -> str:
        removed.append(contact_id)
        return "ok"

    model = scripted([ToolCallPart("remove_contact", {"contact_id": "+1-555"}, tool_call_id="r1")])
    contracts = {"remove_contact": {"refs": {"contact_id": "contact_id"}}}
    agent = Agent(
        model, tools=[remove_contact], capabilities=[ToolGuard(guard, contracts=contracts)]
    )
    with guard.trajectory("log") as traj:
        run(agent, "remove it")
    assert removed == ["+1-555"]  # it ran
    (verdict,) = traj.verdicts
    assert (verdict.valid, verdict.decision, verdict.cause) == (False, "logged", "dependency")
    assert traj.first_error_depth == 1


# -- the framework's own rejections ---------------------------------------------------------------
def test_unknown_tool_and_invalid_arguments_count_as_steps(otel: Telemetry, run: Runner) -> None:
    guard = otel.guard()

    def add(a: int, b: int) -> int:
        return a + b

    model = scripted(
        [
            ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="ok"),
            ToolCallPart("subtract", {"a": 1}, tool_call_id="unknown"),
            ToolCallPart("add", {"a": "one", "b": 2}, tool_call_id="invalid"),
        ]
    )
    traj = guard.trajectory("refused")
    agent = Agent(model, tools=[add], capabilities=[ToolGuard(guard, trajectory=traj)])
    run(agent, "add")

    verdicts = by_call_id(traj)
    assert {i: v.step for i, v in verdicts.items()} == {"ok": 1, "unknown": 2, "invalid": 3}
    assert (verdicts["unknown"].cause, verdicts["unknown"].check) == ("schema", "schema.tool")
    assert (verdicts["invalid"].cause, verdicts["invalid"].check) == ("schema", "schema.args")
    assert (traj.length, traj.first_error_depth) == (3, 2)
    # The span says which argument and why, never the value the model sent.
    message = verdicts["invalid"].message or ""
    assert "a: int_parsing" in message and "one" not in message


def test_unknown_tool_refused_until_the_run_ends_still_counts(otel: Telemetry, run: Runner) -> None:
    guard = otel.guard()

    def add(a: int, b: int) -> int:
        return a + b

    wrong = [ToolCallPart("subtract", {"a": 1}, tool_call_id=f"w{i}") for i in range(3)]
    model = scripted([wrong[0]], [wrong[1]], [wrong[2]])
    traj = guard.trajectory("exhausted")
    agent = Agent(model, tools=[add], retries=1, capabilities=[ToolGuard(guard, trajectory=traj)])
    with pytest.raises(UnexpectedModelBehavior):
        run(agent, "subtract")
    assert [v.call_id for v in traj.verdicts] == ["w0", "w1"]
    assert {v.check for v in traj.verdicts} == {"schema.tool"}
    assert (traj.length, traj.first_error_depth, traj.ended) == (2, 1, True)


# -- how a rejection reaches the model ----------------------------------------------------------
def blocked_agent(guard: tg.Guard, **options: Any) -> tuple[Agent[None, str], list[Any]]:
    seen: list[Any] = []

    def remove_contact(contact_id: str) -> str:
        return "removed"

    def bad_call(i: int) -> Any:
        def turn(request: ModelRequest) -> list[ToolCallPart]:
            seen.extend(returns(request).values())
            return [ToolCallPart("remove_contact", {"contact_id": f"x{i}"}, tool_call_id=f"b{i}")]

        return turn

    model = scripted(*[bad_call(i) for i in range(3)], lambda request: seen.extend(
        returns(request).values()) or [])  # fmt: skip
    contracts = {"remove_contact": {"refs": {"contact_id": "contact_id"}}}
    capability = ToolGuard(guard, contracts=contracts, **options)
    # One retry allowed: three blocked calls in a row would end a run that paid for them.
    return Agent(model, tools=[remove_contact], retries=1, capabilities=[capability]), seen


@pytest.mark.parametrize(("rejection", "outcome"), [("failed", "failed"), ("return", "success")])
def test_rejections_do_not_use_the_retry_budget(
    otel: Telemetry, run: Runner, rejection: str, outcome: str
) -> None:
    guard = otel.guard()
    agent, seen = blocked_agent(guard, rejection=rejection)
    with guard.trajectory("blocked") as traj:
        assert run(agent, "remove").output == "done"
    assert [p.outcome for p in seen] == [outcome] * 3
    assert all(p.content.startswith("Error: the call to `remove_contact`") for p in seen)
    assert [v.decision for v in traj.verdicts] == ["blocked"] * 3


def test_rejection_retry_counts_against_the_retry_budget(otel: Telemetry, run: Runner) -> None:
    guard = otel.guard()
    agent, seen = blocked_agent(guard, rejection="retry")
    with guard.trajectory("blocked") as traj, pytest.raises(UnexpectedModelBehavior):
        run(agent, "remove")
    assert [p.outcome for p in seen] == ["retried"]
    assert "rejected (dependency)" in str(seen[0].content)
    assert traj.length == 2  # the second blocked call exhausted the budget of one retry


def test_invalid_arguments_refused_until_the_run_ends_still_count(
    otel: Telemetry, run: Runner
) -> None:
    guard = otel.guard()

    def add(a: int, b: int) -> int:
        return a + b

    bad = [ToolCallPart("add", {"a": "x", "b": 1}, tool_call_id=f"v{i}") for i in range(3)]
    traj = guard.trajectory("invalid")
    agent = Agent(
        scripted([bad[0]], [bad[1]], [bad[2]]),
        tools=[add],
        retries=1,
        capabilities=[ToolGuard(guard, trajectory=traj)],
    )
    with pytest.raises(UnexpectedModelBehavior):
        run(agent, "add")
    assert [(v.call_id, v.check) for v in traj.verdicts] == [
        ("v0", "schema.args"), ("v1", "schema.args")]  # fmt: skip
    assert (traj.length, traj.first_error_depth) == (2, 1)


def test_an_argument_validator_that_fails_the_call_counts(otel: Telemetry, run: Runner) -> None:
    guard = otel.guard()

    def no_negatives(ctx: RunContext[None], amount: int) -> None:
        if amount < 0:
            raise ToolFailed("amounts are positive")

    def pay(amount: int) -> str:
        return "paid"

    agent = Agent(
        scripted(
            [
                ToolCallPart("pay", {"amount": -5}, tool_call_id="neg"),
                ToolCallPart("pay", {"amount": 5}, tool_call_id="pos"),
            ]
        ),
        tools=[Tool(pay, args_validator=no_negatives)],
        capabilities=[ToolGuard(guard)],
    )
    with guard.trajectory("validator") as traj:
        run(agent, "pay")
    verdicts = by_call_id(traj)
    assert (verdicts["neg"].step, verdicts["neg"].check) == (1, "schema.args")
    assert (verdicts["pos"].step, verdicts["pos"].valid) == (2, True)
    assert "-5" not in (verdicts["neg"].message or "")
