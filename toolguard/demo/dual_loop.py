"""The paper's Dual-Loop agent: draft a plan, verify it, repair it, then execute it.

The outer loop plans and the guard verifies (``guard.verify_plan`` on a deep copy of the app:
schema, dependencies through the plan's references, preconditions on the copy as the plan
changes it, and the app's own answer to each step); the inner loop executes the verified
plan. The draft makes the mistake of the ReAct policy it is paired with (agents.py), so the
two differ only in when the mistake is found: before anything ran, or by a rejected call.
A repair reads only what a planner model would read: the failed step, its cause, its check.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import toolguard as tg

from .agents import Call, Task, _lookup

MAX_ROUNDS = 4  # verify-and-repair rounds before executing whatever the plan is then
SHORT_TEXT = "Running late, sorry."
_LONG_TEXT = "Running late, " + "so sorry about this, " * 10 + "see you soon."


@dataclass
class LoopCost:
    """What planning cost one episode: verifications run, planned steps they checked, time."""

    verifications: int = 0
    steps_verified: int = 0
    seconds: float = 0.0


def draft(policy: str, task: Task) -> list[dict[str, Any]]:
    """The first plan, with the mistake the ReAct policy ``policy`` makes on ``task``."""
    if task.kind == "add":
        number = "+1-555-0100" if policy == "invents" else task.phone  # invented: not grounded
        return [_step("add_contact", name=task.name, phone_number=number)]
    target = "remove_contact" if task.kind == "remove" else "send_message"
    extra = (
        {}
        if task.kind == "remove"
        else {"text": _LONG_TEXT if policy == "verbose" else "Running late"}
    )
    if policy == "phone_as_id":
        return [_step(target, contact_id=task.phone, **extra)]
    lookup: dict[str, Any] = dict(_lookup(task))
    if policy == "invents" and task.kind == "remove":
        lookup = {"phone_number": 15550199}  # a JSON number where a string belongs
    return [_step("search_contacts", **lookup), _step(target, contact_id=_first_id(0), **extra)]


def repair(
    plan: list[dict[str, Any]], verdict: tg.PlanVerdict, task: Task
) -> list[dict[str, Any]] | None:
    """The plan changed where the verdict says it fails, or None when the planner has no fix."""
    at = verdict.failed
    if at is None:
        return None
    step = plan[at]
    args = dict(step["arguments"])
    if verdict.cause == "schema" and step["tool"] == "search_contacts":
        return [*plan[:at], _step("search_contacts", **_lookup(task)), *plan[at + 1 :]]
    if verdict.cause == "dependency" and "contact_id" in args:
        # Look the id up first, then refer to it: every later reference moves one step on.
        search = _step("search_contacts", phone_number=task.phone)
        fixed = _step(step["tool"], **{**args, "contact_id": _first_id(at)})
        return [*plan[:at], search, fixed, *(_shifted(s, at) for s in plan[at + 1 :])]
    if verdict.cause == "precondition" and (verdict.check or "").endswith("cellular_on"):
        return [*plan[:at], _step("set_cellular", on=True), *(_shifted(s, at) for s in plan[at:])]
    if verdict.cause == "state_consistency" and len(str(args.get("text", ""))) > len(SHORT_TEXT):
        return [*plan[:at], _step(step["tool"], **{**args, "text": SHORT_TEXT}), *plan[at + 1 :]]
    return None


def run(guard: tg.Guard, call: Call, policy: str, task: Task) -> LoopCost:
    """Plan, verify and repair (outer loop), then execute the plan (inner loop)."""
    cost = LoopCost()
    start = time.perf_counter()
    plan = draft(policy, task)
    for _ in range(MAX_ROUNDS):
        verdict = guard.verify_plan(plan, dry_run=tg.DeepCopyFork())
        cost.verifications += 1
        cost.steps_verified += len(verdict.steps)
        if verdict.ok:
            break
        repaired = repair(plan, verdict, task)
        if repaired is None:
            break  # nothing the planner knows to change: execute, and let the guard judge
        plan = repaired
    cost.seconds = time.perf_counter() - start
    execute(call, plan)
    return cost


def execute(call: Call, plan: list[dict[str, Any]]) -> None:
    """Each step with its references replaced by the real results; stops at a rejection."""
    results: list[Any] = []
    for step in plan:
        arguments = _resolved(step["arguments"], results)
        if arguments is None:
            return  # a result without what the plan expected of it: the plan is stale
        result = call(step["tool"], arguments)
        if isinstance(result, tg.Rejection):
            return
        results.append(result)


def _step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def _first_id(step: int) -> dict[str, Any]:
    return {"$step": step, "path": "0.id"}


def _shifted(step: dict[str, Any], after: int) -> dict[str, Any]:
    """``step`` with its references to steps at or after ``after`` moved one step on."""
    args = {
        k: {**v, "$step": v["$step"] + 1} if _is_ref(v) and v["$step"] >= after else v
        for k, v in step["arguments"].items()
    }
    return _step(step["tool"], **args)


def _is_ref(value: Any) -> bool:
    return isinstance(value, Mapping) and "$step" in value


def _resolved(arguments: Mapping[str, Any], results: list[Any]) -> dict[str, Any] | None:
    """The step's arguments with each reference replaced by the value it names in an earlier
    step's real result (the reference syntax verify_plan reads); None when one names nothing."""
    try:
        return tg.resolve_plan_refs(arguments, results)
    except tg.PlanRefError:
        return None
