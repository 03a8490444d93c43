"""Put toolguard in front of the BFCL backends and replay a trajectory through it.

One Guard per task (its tools are that task's backend instances); the ToolSpecs are built
once per (class, function) so their compiled schemas are shared by all 800 tasks.
The guard runs in ``log`` mode: every call executes exactly as on the raw backend, so the
guard's verdict for each step can be compared with the raw replay step for step; a call the
guard flags before execution is one that ``block`` mode would have stopped.
"""

from __future__ import annotations

import copy
import pickle
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolguard as tg
from benchmarks._forkcost import TimedFork, no_op_transaction
from benchmarks.bfcl.configs import CONFIGS, DEFAULT, spec
from benchmarks.bfcl.data import Call, Task, function_docs
from benchmarks.bfcl.env import Environment
from benchmarks.bfcl.rules import RULES
from toolguard.replay.given import user_values  # the values a user gave: bound ids

PRE_EXECUTION = ("schema", "dependency", "precondition", "information")
DRY_RUN_CHECK = "state.dry_run"  # the check id of a rejection found on the fork
# the check ids of the environment's rejection of the real execution (log mode runs the call)
EXECUTION_CHECKS = frozenset({"state.error_result", "state.exception"})


def offered(task: Task, class_name: str, turn: int) -> list[str]:
    """The class's functions in the model's tool list at ``turn`` (miss_func, exclusions)."""
    held = {f for t, names in task.missed.items() if turn < t for f in names}
    return [f for f in function_docs(class_name) if f not in task.excluded and f not in held]


@dataclass
class StepVerdict:
    step: int
    tool: str
    valid: bool
    cause: str | None
    check: str | None
    decision: str | None
    message: str | None
    dry_run: bool = False  # the flag came from the fork dry-run, before the real execution
    dry_run_outcome: str | None = None  # passed / rejected / guard_error; None: no dry run
    real_rejected: bool = False  # the real execution, right after, was rejected too

    @property
    def before_execution(self) -> bool:
        """A flag that block mode would have raised before the real call ran."""
        return not self.valid and (self.cause in PRE_EXECUTION or self.dry_run)


@dataclass
class GuardedRun:
    verdicts: list[StepVerdict]
    fed: int
    cause: str | None

    def first_flag(self) -> StepVerdict | None:
        return next((v for v in self.verdicts if not v.valid), None)


def _pickled(state: Any) -> Any:
    # the backends' states are plain Python objects: a pickle round trip is a deep copy
    return pickle.loads(pickle.dumps(state, pickle.HIGHEST_PROTOCOL))


def _keep(forked: Any) -> None:
    """Nothing to release: the copy is dropped with its last reference."""


def fork_strategies() -> dict[str, Any]:
    """The fork strategies whose cost the comparison measures (the first is the default).
    The no-op transaction isolates nothing: it is the floor of any transactional dry run,
    what the guard's own path for one costs."""
    return {
        "tg.UndoLogFork()": tg.UndoLogFork(),
        "tg.DeepCopyFork()": tg.DeepCopyFork(),
        "tg.CallbackFork(pickle round trip)": tg.CallbackFork(fork=_pickled, discard=_keep),
        "tg.CallbackFork(no-op transaction: the floor)": no_op_transaction(),
    }


class Harness:
    """Owns the span pipeline: the user's exporter (a file) plus an in-memory copy we read.

    ``config`` is one of ``configs.CONFIGS``; a dry-run configuration tries every call with
    ``fork`` (default: ``tg.UndoLogFork()``, or ``tg.DeepCopyFork()`` where the configuration
    says ``copy``).
    """

    def __init__(
        self, provider: Any, config: str = DEFAULT, fork: Any = None, timed: bool = False
    ) -> None:
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        self.provider = provider
        self.config = CONFIGS[config]
        self.fork: Any = None
        if self.config.dry_run:
            default = tg.DeepCopyFork() if self.config.copy else tg.UndoLogFork()
            self.fork = fork or default
        # per call when timed: (seconds in guard.call, seconds in fork/discard, forks)
        self.timings: list[tuple[float, float, int]] | None = [] if timed else None
        self.memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(self.memory))

    def run(
        self,
        task: Task,
        calls: list[tuple[int, Call]],
        trajectory_id: str,
        labels: dict[str, str],
        success: bool | None = None,
    ) -> GuardedRun:
        env = Environment(task)
        options: dict[str, Any] = {}
        if self.fork is not None:
            options["dry_run"] = self.fork
        guard = tg.Guard(mode="log", tracer_provider=self.provider, **options)
        proxied: set[tuple[str, str]] = set()

        def offer(turn: int) -> None:
            for class_name, instance in env.instances.items():
                names = [
                    n for n in offered(task, class_name, turn) if (class_name, n) not in proxied
                ]
                if names:
                    guard.proxy(
                        instance,
                        tools={n: spec(class_name, n, self.config.key) for n in names},
                    )
                    proxied.update((class_name, n) for n in names)

        kinds = {
            k
            for c in task.involved_classes
            for r in RULES.get(c, {}).values()
            for k in r.refs.values()
        }
        by_turn: dict[int, list[Call]] = {}
        for turn, call in calls:
            by_turn.setdefault(turn, []).append(call)
        self.memory.clear()
        with tg.trajectory(trajectory_id, labels=labels, tracer_provider=self.provider) as traj:
            for turn in range(len(task.questions)):
                offer(turn)
                for message in task.questions[turn]:
                    traj.observe(message["content"])
                    for value in user_values(message["content"]):
                        for kind in kinds:
                            traj.bind(kind, value)
                for call in by_turn.get(turn, []):
                    kwargs = copy.deepcopy(env.normalise(call))
                    t0 = time.perf_counter()
                    # A backend's exception comes back as a Rejection (its span records it as
                    # state_consistency); the replay goes on, as BFCL's executor does.
                    guard.call(call.name, kwargs)
                    if self.timings is not None:
                        took = time.perf_counter() - t0
                        forks = self.fork.take() if isinstance(self.fork, TimedFork) else (0, 0)
                        self.timings.append((took, *forks))
            traj.success = success
            fed, cause = traj.first_error_depth, traj.first_error_cause
        return GuardedRun(self._verdicts(trajectory_id), fed, cause)

    def _verdicts(self, trajectory_id: str) -> list[StepVerdict]:
        out = []
        for span in self.memory.get_finished_spans():
            a = span.attributes or {}
            if a.get("toolguard.trajectory.id") != trajectory_id or "toolguard.step" not in a:
                continue
            if span.name == "toolguard.trajectory":
                continue
            out.append(
                StepVerdict(
                    step=int(a["toolguard.step"]),
                    tool=str(a.get("gen_ai.tool.name")),
                    valid=bool(a.get("toolguard.valid")),
                    cause=a.get("toolguard.cause"),
                    check=a.get("toolguard.check"),
                    decision=a.get("toolguard.decision"),
                    message=a.get("toolguard.message"),
                    dry_run=a.get("toolguard.check") == DRY_RUN_CHECK,
                    dry_run_outcome=a.get("toolguard.dry_run"),
                    real_rejected=bool(
                        EXECUTION_CHECKS & set(a.get("toolguard.failed_checks", ()))
                    ),
                )
            )
        self.memory.clear()
        return sorted(out, key=lambda v: v.step)
