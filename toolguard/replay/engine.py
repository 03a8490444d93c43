"""Replay one recorded run through a guard, as one cohort.

``environment``: validity is the environment's own recorded answer. Every tool is declared
with a permissive schema and the guard logs rather than blocks, so a call is invalid exactly
when its arguments are not a JSON object (it could not have run) or its answer says it
failed. ``with_contract``: the tools are declared from a contract file (the run's own
parameter schemas where the format records them), in the file's mode; a call the guard
blocks does not run, so its recorded answer is not read, and every other call is closed
with its recorded answer, which the contract's ``produces`` and postconditions read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry.trace import TracerProvider

# The runtime as a user sees it, the package's public names: its modules may move.
from .. import Contract, Guard, ToolSpec, Trajectory
from .model import Executor, RecordedCall, RecordedRun, Said

ENVIRONMENT = "environment"
WITH_CONTRACT = "with_contract"
COHORTS = (ENVIRONMENT, WITH_CONTRACT)
PERMISSIVE: Mapping[str, Any] = {"type": "object"}


@dataclass
class ReplayState:
    """What a contract's predicates get as ``state`` during a replay: the run's id and the
    calls that ran before this one without an error, as (tool, arguments, result)."""

    run: str
    results: list[tuple[str, Any, Any]] = field(default_factory=list)


class Replayer:
    """Replays runs through a fresh guard per run whose spans go to ``tracer_provider``.

    ``labels`` are added to every trajectory's (they override the format's own);
    ``id_prefix`` goes between the cohort and the run id of every trajectory id, so two
    recorded runs of one model (two methods, two serving stacks) stay apart. Spans are
    flushed every ``flush_every`` spans (a batch processor drops spans once its queue is
    full; flushing keeps it short whatever the input's size)."""

    def __init__(
        self,
        tracer_provider: TracerProvider,
        *,
        contract: Contract | None = None,
        labels: Mapping[str, str] | None = None,
        id_prefix: str = "",
        flush_every: int = 4096,
    ) -> None:
        self.provider = tracer_provider
        self.contract = contract
        self.labels = dict(labels or {})
        self.id_prefix = id_prefix.strip("/")
        self.flush_every = flush_every
        self._unflushed = 0
        self._specs: dict[tuple[str, str, str, str], ToolSpec] = {}

    @property
    def cohorts(self) -> tuple[str, ...]:
        return COHORTS if self.contract is not None else (ENVIRONMENT,)

    def trajectory_id(self, run: RecordedRun, cohort: str = ENVIRONMENT) -> str:
        """``<cohort>/<id prefix>/<run id>`` (no prefix: ``<cohort>/<run id>``)."""
        return "/".join(p for p in (cohort, self.id_prefix, run.id) if p)

    def trajectory_labels(self, run: RecordedRun, cohort: str = ENVIRONMENT) -> dict[str, str]:
        """The labels ``run``'s trajectory in ``cohort`` gets."""
        return {
            **run.labels,
            "task": run.task or run.id,
            "run": run.id,
            "replay": cohort,
            **self.labels,
        }

    def replay(self, run: RecordedRun, cohort: str = ENVIRONMENT) -> Trajectory:
        """Replay ``run`` as ``cohort``; returns the ended trajectory (T, FED, verdicts)."""
        if cohort not in COHORTS:
            raise ValueError(f"cohort must be one of {', '.join(COHORTS)}, not {cohort!r}")
        contract = self.contract if cohort == WITH_CONTRACT else None
        if cohort == WITH_CONTRACT and contract is None:
            raise ValueError("the with_contract cohort needs a contract")
        mode: Literal["block", "log"] = "log"
        if contract is not None and contract.mode == "block":
            mode = "block"
        state = ReplayState(run.id)
        # error_result=None: the recorded answer's own flag decides, and it is always passed.
        guard = Guard(mode=mode, state=state, tracer_provider=self.provider, error_result=None)
        declared: set[str] = set()
        if contract is not None and run.tools is not None:
            # The run says what it offered: any other tool is unknown to the what-if.
            for name in {**dict.fromkeys(run.tools), **dict.fromkeys(contract.tools)}:
                spec = self._spec(name, run.tools.get(name), contract, run.null_as_default)
                guard.declare(name, spec)
            declared = set(run.tools) | set(contract.tools)
            declare_on_sight = False
        else:
            declare_on_sight = True
        execute = run.environment() if run.environment is not None else None
        labels = self.trajectory_labels(run, cohort)
        with guard.trajectory(self.trajectory_id(run, cohort), labels=labels) as traj:
            for event in run.events:
                if isinstance(event, Said):
                    traj.observe(event.text)
                    continue
                ids = _unique_ids(event.calls, traj.length)
                traj.reserve(ids)  # steps in emission order, by call id
                for call, call_id in zip(event.calls, ids, strict=True):
                    if declare_on_sight and call.name not in declared:
                        spec = self._spec(call.name, None, contract, run.null_as_default)
                        guard.declare(call.name, spec)
                        declared.add(call.name)
                    self._call(guard, traj, call, call_id, state, execute)
            traj.success = run.success
        self._count()  # the summary span
        return traj

    def _call(
        self,
        guard: Guard,
        traj: Trajectory,
        call: RecordedCall,
        call_id: str,
        state: ReplayState,
        execute: Executor | None,
    ) -> None:
        pending = guard.check(call.name, call.arguments, call_id=call_id, trajectory=traj)
        if pending.rejection is None:  # blocked: nothing ran, the recorded answer is not read
            answer = execute(call) if execute is not None else call.answer
            if answer is None:
                pending.cancel()  # emitted, never answered in the log
            else:
                pending.finish(answer.result, error=answer.error)
                if not answer.error:
                    state.results.append((call.name, pending.arguments, answer.result))
        self._count()

    def _count(self) -> None:
        self._unflushed += 1
        if self._unflushed >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        self._unflushed = 0
        force_flush: Callable[[], Any] | None = getattr(self.provider, "force_flush", None)
        if force_flush is not None:
            force_flush()

    def _spec(
        self,
        name: str,
        schema: Mapping[str, Any] | None,
        contract: Contract | None,
        null_as_default: bool = False,
    ) -> ToolSpec:
        # ToolSpecs keep their compiled validators: one spec per (tool, schema) serves every run.
        key = (
            name,
            "" if contract is None else contract.path,
            "null" if null_as_default else "",
            json.dumps(schema, sort_keys=True, default=str) if schema is not None else "",
        )
        spec = self._specs.get(key)
        if spec is None:
            if contract is None:
                spec = ToolSpec(name=name, json_schema=PERMISSIVE)
            else:
                spec = contract.spec_for(name, schema, null_as_default=null_as_default)
            self._specs[key] = spec
        return spec


def _unique_ids(calls: list[RecordedCall], before: int) -> list[str]:
    """The calls' ids for reservation: the recorded id where the turn uses it once, else made
    unique (a turn that reuses an id, or a log without ids) so each call keeps its own step."""
    seen: dict[str | None, int] = {}
    for call in calls:
        seen[call.call_id] = seen.get(call.call_id, 0) + 1
    out = []
    for k, call in enumerate(calls, start=1):
        if call.call_id and seen[call.call_id] == 1:
            out.append(call.call_id)
        else:
            out.append(f"{call.call_id or 'call'}#{before + k}")
    return out
