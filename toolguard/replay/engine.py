"""Replay one recorded run through a guard, as one cohort.

``environment``: validity is the environment's own recorded answer. Every tool is declared
with a permissive schema and the guard logs rather than blocks, so a call is invalid exactly
when its arguments are not a JSON object (it could not have run) or its answer says it
failed. ``with_contract``: the tools are declared from a contract file (the run's own
parameter schemas where the format records them), in the file's mode; a call the guard
blocks does not run, so its recorded answer is not read, and every other call is closed
with its recorded answer, which the contract's ``produces`` and postconditions read. Values
the user gave are bound under every kind the contract refers to (``given.py``).
``dry_run``: the run's own schemas and an undo-log dry run of every call, no contract.

On a live environment (BFCL's backends) the ``with_contract`` and ``dry_run`` cohorts let
the guard run each call on the environment's objects (``Guard.proxy``): predicates get the
live object as ``instance``, and the dry run forks it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry.trace import TracerProvider

# The runtime as a user sees it, the package's public names: its modules may move.
from .. import (
    Contract,
    ContractFileError,
    Guard,
    Rejection,
    ToolDefinitionError,
    ToolSpec,
    Trajectory,
    UndoLogFork,
)
from .given import user_values
from .model import Executor, LiveEnvironment, RecordedCall, RecordedRun, ReplayInputError, Said

ENVIRONMENT = "environment"
WITH_CONTRACT = "with_contract"
DRY_RUN = "dry_run"
COHORTS = (ENVIRONMENT, WITH_CONTRACT, DRY_RUN)
# The dry run's tools, where no contract is given: the run's own schemas, nothing by hand.
RUN_SCHEMAS = Contract(path="(the run's own schemas)", mode="log")
PERMISSIVE: Mapping[str, Any] = {"type": "object"}


@dataclass
class ReplayState:
    """What a contract's predicates get as ``state`` during a replay: the run's id and the
    calls that ran before this one without an error, as (tool, arguments, result)."""

    run: str
    results: list[tuple[str, Any, Any]] = field(default_factory=list)
    live: bool = False  # the calls run on a live environment (predicates get ``instance``)


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
        dry_run: bool = False,
        flush_every: int = 4096,
        dry_run_contract: Contract | None = None,
    ) -> None:
        self.provider = tracer_provider
        self.contract = contract
        self.dry_run = dry_run
        # The dry run's own rules before its fork (an inferred contract's, say); by default
        # none: the run's own schemas.
        self.dry_run_contract = dry_run_contract
        self.labels = dict(labels or {})
        self.id_prefix = id_prefix.strip("/")
        self.flush_every = flush_every
        self._unflushed = 0
        self._specs: dict[tuple[str, str, str, str], ToolSpec] = {}
        # Every tool a replayed run offered or called: a contract's tool outside it is
        # probably misspelt (``unknown_contract_tools``).
        self.tools_seen: set[str] = set()
        # With a contract: every top-level argument name each called tool's calls carried.
        # Without a schema nothing else can tell that a contract's ``refs`` or ``grounded``
        # names no argument of the tool (``unused_contract_arguments``).
        self.arguments_seen: dict[str, set[str]] = {}

    def unknown_contract_tools(self) -> list[str]:
        """The contract's tools no replayed run offered or called (a misspelt name checks
        nothing), sorted; empty without a contract."""
        return [] if self.contract is None else self.contract.unknown_tools(self.tools_seen)

    def unused_contract_arguments(self) -> list[str]:
        """``tool.argument (refs)`` / ``(grounded)`` for each argument the contract names
        that no replayed call of its tool carried (misspelt, or never used: its rule checked
        nothing), sorted; tools never called are ``unknown_contract_tools``' or unused."""
        if self.contract is None:
            return []
        out = []
        for name, spec in self.contract.tools.items():
            seen = self.arguments_seen.get(name)
            if seen is None:
                continue
            named = [(path, "refs") for path in spec.refs] + [
                (g, "grounded") for g in spec.grounded
            ]
            out += [f"{name}.{path} ({what})" for path, what in named if _top(path) not in seen]
        return sorted(set(out))

    def _saw_arguments(self, call: RecordedCall) -> None:
        seen = self.arguments_seen.setdefault(call.name, set())
        arguments = call.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except (ValueError, RecursionError):
                return
        if isinstance(arguments, Mapping):
            seen.update(k for k in arguments if isinstance(k, str))

    @property
    def cohorts(self) -> tuple[str, ...]:
        """The readings each run is replayed as: the environment's always, the contract's
        with a contract, the dry run's when asked."""
        return tuple(
            c
            for c, on in (
                (ENVIRONMENT, True),
                (WITH_CONTRACT, self.contract is not None),
                (DRY_RUN, self.dry_run),
            )
            if on
        )

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
        if run.tools is not None:
            self.tools_seen.update(run.tools)
        contract = self.contract if cohort == WITH_CONTRACT else None
        if cohort == WITH_CONTRACT and contract is None:
            raise ValueError("the with_contract cohort needs a contract")
        if cohort == DRY_RUN:  # the fork alone: no contract's hand-written rule
            contract = self.dry_run_contract or RUN_SCHEMAS
        mode: Literal["block", "log"] = "log"
        if contract is not None and contract.mode == "block":
            mode = "block"
        state = ReplayState(run.id)
        execute = run.environment() if run.environment is not None else None
        # A contract or a dry run on a live environment: the guard runs each call on its
        # objects, so predicates read the live state (``instance``) and a dry run can fork it.
        live = execute if cohort != ENVIRONMENT and isinstance(execute, LiveEnvironment) else None
        if cohort == DRY_RUN and live is None and run.length:  # no call: nothing to fork
            raise ReplayInputError(
                f"{run.where}: a dry run needs the run's live environment (BFCL's backends, "
                "with bfcl-eval installed); this run has none"
            )
        state.live = live is not None
        guard = Guard(
            mode=mode,
            state=state,
            tracer_provider=self.provider,
            # Replayed answers carry their own error flag; a live object's result is read by
            # the environment's rejection markers.
            error_result=live.error_result if live is not None else None,
            dry_run=UndoLogFork() if cohort == DRY_RUN else None,
        )
        declared: set[str] = set()
        declare_on_sight = False
        if live is not None:
            self.tools_seen.update(live.owners)
            with _in_contract(contract):
                _proxy(guard, live, lambda n: self._spec(n, _schema(run, n), contract, run))
        elif contract is not None and run.tools is not None:
            # The run says what it offered: any other tool is unknown to the what-if.
            with _in_contract(contract):
                for name in {**dict.fromkeys(run.tools), **dict.fromkeys(contract.tools)}:
                    guard.declare(name, self._spec(name, run.tools.get(name), contract, run))
            declared = set(run.tools) | set(contract.tools)
        else:
            declare_on_sight = True
        labels = self.trajectory_labels(run, cohort)
        # A value the user gave is a bound variable too (the protocol): under every kind the
        # contract refers to, as the BFCL harness binds them.
        kinds = (
            sorted({k for t in contract.tools.values() for k in t.refs.values()})
            if contract
            else []
        )
        with guard.trajectory(self.trajectory_id(run, cohort), labels=labels) as traj:
            if contract is not None and contract.initial:
                # What existed before the first call is usable from the start; the model was
                # not shown it, so it is never offered nor counted as seen.
                for kind, value in contract.initial_values(run.initial):
                    traj.bind(kind, value, source="initial state", shown=False)
            for event in run.events:
                if isinstance(event, Said):
                    traj.observe(event.text)
                    if kinds:
                        for value in user_values(event.text):
                            for kind in kinds:
                                traj.bind(kind, value)
                    continue
                ids = _unique_ids(event.calls, traj.length)
                traj.reserve(ids)  # steps in emission order, by call id
                for call, call_id in zip(event.calls, ids, strict=True):
                    self.tools_seen.add(call.name)
                    if cohort == WITH_CONTRACT:  # once per run, where the contract is read
                        self._saw_arguments(call)
                    if declare_on_sight and call.name not in declared:
                        with _in_contract(contract):
                            guard.declare(call.name, self._spec(call.name, None, contract, run))
                        declared.add(call.name)
                    if live is not None:
                        self._live_call(guard, traj, call, call_id, state)
                    else:
                        self._call(guard, traj, call, call_id, state, execute)
            traj.success = run.success
        self._count()  # the summary span
        return traj

    def _live_call(
        self, guard: Guard, traj: Trajectory, call: RecordedCall, call_id: str, state: ReplayState
    ) -> None:
        arguments = call.arguments
        if isinstance(arguments, Mapping):  # fresh objects per call: backends keep lists
            arguments = copy.deepcopy(dict(arguments))
        result = guard.call(call.name, arguments, call_id=call_id, trajectory=traj)
        if not isinstance(result, Rejection):
            state.results.append((call.name, arguments, result))
        self._count()

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
        run: RecordedRun,
    ) -> ToolSpec:
        null_as_default = run.null_as_default
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
                own = contract.tools.get(name)
                if schema is not None and (own is None or own.json_schema is None):
                    # The run's own schema, read from the recording, is used: what is wrong
                    # with it is the recording's fault, not the contract file's.
                    why = _schema_problem(name, schema)
                    if why is not None:
                        raise ReplayInputError(f"{run.where}: {why}")
                spec = contract.spec_for(name, schema, null_as_default=null_as_default)
            self._specs[key] = spec
        return spec


@contextlib.contextmanager
def _in_contract(contract: Contract | None) -> Iterator[None]:
    """A tool the contract file declares wrongly (``refs`` naming no argument of the run's
    schema, a predicate whose parameters are none of the tool's): the error names the file."""
    try:
        yield
    except ToolDefinitionError as exc:
        if contract is None or not contract.path or contract is RUN_SCHEMAS:
            raise
        raise ContractFileError(f"{contract.path}: {exc}") from exc


def _schema_problem(name: str, schema: Mapping[str, Any]) -> str | None:
    """Why a recorded JSON Schema cannot check a call, or None: the guard refuses to declare
    a tool by it (not a valid schema, a ``$ref`` that resolves nowhere)."""
    try:
        Guard().declare(name, spec=ToolSpec(name=name, json_schema=dict(schema)))
    except ToolDefinitionError as exc:
        return str(exc)
    return None


def _top(path: str) -> str:
    """The argument an argument path starts at: ``a`` of ``a``, ``a.b``, ``a[].b``."""
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def _schema(run: RecordedRun, name: str) -> Mapping[str, Any] | None:
    return run.tools.get(name) if run.tools is not None else None


def _proxy(guard: Guard, live: LiveEnvironment, spec: Callable[[str], ToolSpec]) -> None:
    """Guard every tool of ``live`` on its own object (one proxy per object)."""
    by_object: dict[int, tuple[Any, dict[str, ToolSpec | None]]] = {}
    for name, (obj, method) in live.owners.items():
        if method != name:
            continue  # a tool not named as its method: nothing here makes one
        by_object.setdefault(id(obj), (obj, {}))[1][name] = spec(name)
    for obj, tools in by_object.values():
        guard.proxy(obj, tools=tools)


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
