"""The guarded replay: tau2's tools behind a toolguard Guard, one trajectory per task.

Each tool is registered by name with tau2's own parameter schema (``Tool.openai_schema``)
and runs through ``Environment.get_response``, so the environment's rejection
(``error=True``, from a tool's ``ValueError``) becomes a raised exception the guard records
as ``state_consistency``. The guard blocks (``mode="block"``); calls are dispatched with
``guard.call``, which returns a Rejection for a refused call (and for a tool that raised), so
the replay goes on after it, as an agent would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import toolguard as tg
from benchmarks.tau2._tau2 import fresh_environment, openai_schemas, tool_call
from benchmarks.tau2.context import Context, account_bindings
from benchmarks.tau2.oracle import parse_content
from benchmarks.tau2.specs import SPECS, Live, user_ids
from benchmarks.tau2.tasks import GroundTruth

PRE_EXECUTION = frozenset({"schema", "dependency", "precondition", "information"})


class EnvironmentRejected(Exception):
    """tau2 answered the call with ``error=True`` (its tool raised)."""


@dataclass(frozen=True)
class StepVerdict:
    name: str
    cause: str | None  # None: valid
    check: str | None
    message: str | None

    @property
    def blocked(self) -> bool:
        return self.cause in PRE_EXECUTION


@dataclass(frozen=True)
class GuardedRun:
    steps: tuple[StepVerdict, ...]
    fed: int
    cause: str | None
    db_hash: str | None


def _runner(live: Live, name: str) -> Any:
    def run(**arguments: Any) -> Any:
        msg = live.env.get_response(tool_call(name, arguments, f"{name}-call"))
        if msg.error:
            raise EnvironmentRejected(msg.content)
        return parse_content(msg.content)

    run.__name__ = name
    return run


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    # tau2's parameter models allow extra keys in the schema, but the Python tools reject
    # unknown keyword arguments (TypeError -> error=True): say so in the schema, so an
    # unknown argument is the schema error it is rather than a late environment rejection.
    return {**schema, "additionalProperties": False}


@cache
def domain_guard(domain: str) -> tuple[tg.Guard, Live]:
    """One guard per domain and process; ``live.env`` is swapped for every replay."""
    return tau2_guard(domain, SPECS[domain], "block")


def tau2_guard(
    domain: str, specs: Mapping[str, Mapping[str, Any]], mode: Literal["block", "log"]
) -> tuple[tg.Guard, Live]:
    """A guard over the domain's tools with ``specs`` (tool -> register options)."""
    live = Live()
    # tau2 says a call failed with error=True only (the runner raises then): a result that
    # happens to hold an "error" key is no rejection, so the guard's default reader is off.
    guard = tg.Guard(mode=mode, state=live, error_result=None)
    for name, fn_schema in openai_schemas(domain).items():
        guard.register(
            _runner(live, name),
            name=name,
            description=fn_schema.get("description"),
            json_schema=_strict(fn_schema["parameters"]),
            **specs.get(name, {}),
        )
    return guard, live


def guarded_replay(
    task: GroundTruth,
    labels: dict[str, str],
    *,
    reference_hash: str | None = None,
    context: Context = "account",
) -> GuardedRun:
    """Replay ``task.calls`` through the guard; with ``reference_hash`` (the ground truth's
    final DB hash), the outcome Y is whether the guarded run ends in that state."""
    guard, live = domain_guard(task.domain)
    live.env = fresh_environment(task.domain)
    steps = []
    # one id per (task, variant, context): the report keys trajectories by id
    traj_id = "-".join([task.key, labels.get("variant", "gt"), labels.get("context", "")])
    with tg.trajectory(id=traj_id, labels=labels, user_input=task.user_text) as traj:
        for kind, value in user_ids(task.domain, task.user_text):
            traj.bind(kind, value, source="user instruction")
        if context == "account":
            for kind, value in account_bindings(task, live.env, guard):
                traj.bind(kind, value, source="account lookup")
        for i, call in enumerate(task.calls, start=1):
            out = guard.call(call.name, call.arguments, call_id=f"{traj_id}-{i}")
            if isinstance(out, tg.Rejection):
                steps.append(StepVerdict(call.name, out.cause, out.check, out.message))
            else:
                steps.append(StepVerdict(call.name, None, None, None))
        db_hash = live.env.get_db_hash() if reference_hash is not None else None
        if reference_hash is not None:
            traj.success = db_hash == reference_hash
    live.env = None
    return GuardedRun(tuple(steps), traj.first_error_depth, traj.first_error_cause, db_hash)
