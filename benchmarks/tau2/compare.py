"""The four guard configurations side by side on tau2 airline and retail (issue 15).

Same design as ``benchmarks/bfcl/compare.py``: each trajectory (a task's ground truth and
each seeded wrong-id injection) is replayed once on the raw tau2 environment (the oracle:
which calls tau2 rejects), then through the guard under each configuration, in log mode so
every call still executes and the guarded database stays in step with the oracle's. Context
``account`` (see context.py) in every configuration.

- (a) ``schema_deps``: tau2's parameter schemas plus the ``refs`` / ``produces`` of specs.py;
- (b) ``hand_rules``: (a) plus specs.py's preconditions and grounded arguments;
- (c) ``fork``: (a) plus a dry run of every call, no hand state rule;
- (d) ``fork_rules``: (b) plus the dry run;
- (c') ``fork_copy``: (c) on a copy instead (see below).

The dry run of (c) and (d) is the call itself, run once on the real database inside an undo on
read (``fork.begin_live``, a transactional ``tg.CallbackFork``), or, for a tool tau2
declares not to write, inside a transaction that journals nothing (``read_only``); (c')
tries the call on a copy-on-read fork (``fork.fork_live``) and then runs it for real, so its
verdict is a run of its own that can be checked against the real one. A deep copy of the
airline database takes about a second, so it is timed on a sample only (cost.py).
The guarded replays run on copy-on-read environments of one pristine database per process
(0.1 to 0.3 s saved per replay); the oracle runs on tau2's own fresh environment.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cache
from typing import Annotated, Any

import toolguard as tg
from benchmarks._compare import Config, configurations
from benchmarks._forkcost import TimedFork, no_op_transaction, transactional
from benchmarks.tau2._tau2 import fresh_environment, openai_schemas, read_tools, tool_call
from benchmarks.tau2.context import account_bindings
from benchmarks.tau2.fork import begin_live, fork_live, keep_live, lazy_environment, roll_back_live
from benchmarks.tau2.guarded import EnvironmentRejected, _strict
from benchmarks.tau2.inject import inject, injection_classes
from benchmarks.tau2.oracle import parse_content, replay
from benchmarks.tau2.specs import SPECS, Live, user_ids
from benchmarks.tau2.tasks import GroundTruth

PRE_EXECUTION = frozenset({"schema", "dependency", "precondition", "information"})
DRY_RUN_CHECK = "state.dry_run"


CONFIGS: dict[str, Config] = configurations("a copy on read")


def _runner(name: str) -> Any:
    # The state reaches the tool through a tg.State parameter: on a dry run the guard passes
    # the fork there, on the real call its own state.
    def run(tau2: Annotated[Live, tg.State], **arguments: Any) -> Any:
        msg = tau2.env.get_response(tool_call(name, arguments, f"{name}-call"))
        if msg.error:
            raise EnvironmentRejected(msg.content)
        return parse_content(msg.content)

    run.__name__ = name
    return run


def lazy_fork() -> Any:
    return tg.CallbackFork(fork=fork_live)


def undo_fork() -> Any:
    """The call run once on the real database, its touched records' pre-images kept."""
    return tg.CallbackFork(begin_live, roll_back_live, in_place=True, keep=keep_live)


def read_only(strategy: Any) -> Any:
    """The dry run of a tool tau2 declares not to write (``_tau2.read_tools``) beside a
    transactional ``strategy``: the call itself in a transaction with nothing to journal (a
    call that changes nothing has nothing to roll back; ``undo.py`` checks the declaration
    against the database). Timed with ``strategy`` when that is a ``TimedFork``."""
    if isinstance(strategy, TimedFork):
        return strategy.alongside(no_op_transaction())
    return no_op_transaction()


@cache
def config_guard(domain: str, config: str, fork: Any = None) -> tuple[tg.Guard, Live]:
    """One guard per (domain, configuration, fork) and process; ``live.env`` is swapped."""
    live = Live()
    cfg = CONFIGS[config]
    options: dict[str, Any] = {}
    reads: Any = None  # the dry run of a tool that changes nothing
    if cfg.dry_run:
        strategy = fork or (lazy_fork() if cfg.copy else undo_fork())
        options["dry_run"] = strategy
        if transactional(strategy):
            reads = read_only(strategy)
    guard = tg.Guard(mode="log", state=live, error_result=None, **options)
    for name, fn_schema in _schemas(domain).items():
        spec = dict(SPECS[domain].get(name, {}))
        if not cfg.state_rules:
            spec.pop("preconditions", None)
            spec.pop("grounded", None)
        if reads is not None and name in read_tools(domain):
            spec["dry_run"] = reads
        guard.register(
            _runner(name),
            name=name,
            description=fn_schema.get("description"),
            json_schema=_strict(fn_schema["parameters"]),
            **spec,
        )
    return guard, live


@cache
def _schemas(domain: str) -> dict[str, dict[str, Any]]:
    return openai_schemas(domain)


@cache
def _pristine(domain: str) -> Any:
    return fresh_environment(domain)


_ACCOUNTS: dict[tuple[str, str], list[tuple[str, Any]]] = {}


def _account(task: GroundTruth, guard: tg.Guard) -> list[tuple[str, Any]]:
    # What the omitted account look-ups return depends only on the initial database and the
    # user's text (an injection changes neither): read once per task, on a plain fresh
    # environment, instead of scanning 500 users through a copy-on-read one every replay.
    key = (task.domain, task.user_text)
    if key not in _ACCOUNTS:
        _ACCOUNTS[key] = account_bindings(task, fresh_environment(task.domain), guard)
    return _ACCOUNTS[key]


def fresh_lazy_environment(domain: str) -> Any:
    """A fresh environment for a guarded replay: a copy-on-read fork of a pristine one."""
    return lazy_environment(_pristine(domain))


EXECUTION_CHECKS = frozenset({"state.error_result", "state.exception"})


def guarded_steps(
    task: GroundTruth,
    config: str,
    label: str,
    fork: Any = None,
    timings: list[float] | None = None,
    after: list[tuple[float, int]] | None = None,
    environment: Any = None,
) -> list[tuple[bool, bool, str | None, str | None, bool]]:
    """Per step: (flagged before execution, by the dry run, first failed check, the dry
    run's outcome or None, the real execution rejected).

    ``timings`` gets each guarded call's seconds; ``after`` each call's ``fork.take()``
    (a ``TimedFork``: seconds in fork + discard, forks made). ``environment``: the tau2
    environment to replay on (default: a copy-on-read one, see the module's doc).
    """

    guard, live = config_guard(task.domain, config, fork)
    live.env = environment if environment is not None else fresh_lazy_environment(task.domain)
    traj_id = f"{task.key}-{label}-{config}"
    with tg.trajectory(id=traj_id, user_input=task.user_text) as traj:
        for kind, value in user_ids(task.domain, task.user_text):
            traj.bind(kind, value, source="user instruction")
        for kind, value in _account(task, guard):
            traj.bind(kind, value, source="account lookup")
        for i, call in enumerate(task.calls, start=1):
            t0 = time.perf_counter()
            guard.call(call.name, call.arguments, call_id=f"{traj_id}-{i}")
            if timings is not None:
                timings.append(time.perf_counter() - t0)
            if after is not None:
                after.append(fork.take())
        verdicts = sorted(traj.verdicts, key=lambda v: v.step or 0)
    live.env = None
    dry = CONFIGS[config].dry_run
    return [
        (
            not v.valid and (v.cause in PRE_EXECUTION or DRY_RUN_CHECK in v.failed_checks),
            v.check == DRY_RUN_CHECK,
            v.check if not v.valid else None,
            _dry_outcome(dry, v.cause, v.failed_checks),
            bool(EXECUTION_CHECKS & set(v.failed_checks)),
        )
        for v in verdicts
    ]


def _dry_outcome(dry: bool, cause: str | None, failed: tuple[str, ...]) -> str | None:
    # The verdict keeps failed checks only: a dry run ran when one was configured and no
    # cheaper check failed first (then it is only tried once those pass).
    if DRY_RUN_CHECK in failed:
        return "rejected"
    if not dry or cause in PRE_EXECUTION:
        return None
    return "passed"


def lazy_oracle(task: GroundTruth) -> list[tuple[bool, str]]:
    """(rejected, content) per call, on a copy-on-read environment of the pristine one."""
    env = fresh_lazy_environment(task.domain)
    out = []
    for i, c in enumerate(task.calls, start=1):
        msg = env.get_response(tool_call(c.name, c.arguments, f"call-{i}"))
        out.append((bool(msg.error), msg.content))
    return out


def run_task(task: GroundTruth, seed: int, configs: Sequence[str]) -> list[dict[str, Any]]:
    """Call records of the ground truth and every injection of one task, per configuration.

    The ground truth's oracle is tau2's own fresh environment; the injections' oracle runs
    on copy-on-read environments (0.1 to 0.3 s less each), and the ground truth is run that
    way too: every record says whether the two agreed on it, call by call and word for word.
    """
    runs: list[tuple[str, GroundTruth]] = [("ground_truth", task)]
    gt = replay(task.domain, task.calls, always_hash=False)
    lazy_agrees = [(s.rejected, s.content) for s in gt.steps] == lazy_oracle(task)
    if gt.fed > len(task.calls):  # inject only where the ground truth replays cleanly
        for cls in injection_classes(task.domain):
            inj = inject(task, cls, seed)
            if inj is not None:
                runs.append((cls, inj.task))
    out: list[dict[str, Any]] = []
    for method, variant in runs:
        oracle = [(s.rejected, s.content) for s in gt.steps]
        if method != "ground_truth":
            oracle = lazy_oracle(variant)
        for config in configs:
            steps = guarded_steps(variant, config, method)
            for i, ((rejected, _), call, (before, dry, check, outcome, real)) in enumerate(
                zip(oracle, variant.calls, steps, strict=True), start=1
            ):
                out.append(
                    {
                        "config": config,
                        "domain": task.domain,
                        "method": method,
                        "task": task.key,
                        "step": i,
                        "tool": call.name,
                        "backend": task.domain,
                        "env_rejected": rejected,
                        "before_execution": before,
                        "dry_run": dry,
                        "check": check,
                        "dry_run_outcome": outcome,
                        "real_rejected": real,
                        "lazy_oracle_agrees": lazy_agrees,
                    }
                )
    return out
