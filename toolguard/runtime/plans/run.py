"""``guard.verify_plan``: the first step of a plan that would fail, before any step runs.

:func:`verify` (and :func:`averify`, which awaits async tools) takes the steps one by one
through the checks of plan_check.py and then, with a fork, the environment's own answer: the
plan runs step by step on ONE fork per forked object (references resolved from the fork's
real results), so step 3 meets what steps 1 and 2 did. Nothing runs on the real state, no
step of the trajectory is taken and nothing is bound in it. From the first step that cannot
run on the fork (a tool with external effects, without a dry run, declared by contract
alone, async under the sync verify), the rest of the plan is checked without it.

Verification writes its own spans (``verify_plan``, one child per step checked), which the
report never counts (docs/protocol.md, section 6.6); the forks are discarded at the end,
also when a step raised.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN

from ... import _contract as contract
from ..calls import dry_run as dryrun
from ..forks.strategies import DRY_RUN_CHECK, DeepCopyFork, ForkStrategy, UndoLogFork
from ..inherit import Inherit
from ..telemetry import spans as tel
from ..tools.markers import _DEFAULT_FORK
from ..tools.tool import Tool
from ..trajectories.leaves import add_leaves
from ..trajectories.trajectory import Trajectory
from ..verdict import Failure, shorten_text
from .check import StepChecks, _Fork
from .failures import failure_attributes, hashable, malformed, plan_failure, short_id, short_name
from .plan import (
    PlanError,
    PlanStep,
    PlanStepVerdict,
    PlanVerdict,
    read_refs,
    refs_in,
    replace_refs,
)

if TYPE_CHECKING:
    from ..guard import Guard

logger = logging.getLogger("toolguard")


class Run:
    """A step to run on the fork: the call, and how its arguments were resolved."""

    __slots__ = ("args", "call", "kwargs", "tool", "values")

    def __init__(self, tool: Tool, call: Any, args: Any, kwargs: Any, values: Any) -> None:
        self.tool = tool
        self.call = call
        self.args = args
        self.kwargs = kwargs
        self.values = values


class PlanRun(StepChecks):
    """One verification: :func:`verify` and :func:`averify` drive it step by step."""

    # -- the session: spans and forks ---------------------------------------------------------
    def __enter__(self) -> PlanRun:
        tracer = self.guard.tracer
        if not tel.is_noop(tracer):
            attributes: dict[str, Any] = {
                contract.GEN_AI_OPERATION_NAME: contract.OPERATION_VERIFY_PLAN,
                contract.PLAN_LENGTH: len(self.steps),
            }
            parent = None
            if self.traj is not None:
                attributes[contract.TRAJECTORY_ID] = self.traj.id
                if self.traj._span is not None:
                    parent = trace.set_span_in_context(self.traj._span)
            self.span = tel.start_span(tracer, contract.OPERATION_VERIFY_PLAN, parent, attributes)
        if self.plan_error is not None:  # a malformed plan: no step is checked
            self.failure = malformed(self.plan_error.message)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.step_span is not INVALID_SPAN:
            tel.end_span(self.step_span)
            self.step_span = INVALID_SPAN
        for entry in reversed(list(self.forks.values())):
            try:
                entry.strategy.discard(entry.forked)
            except Exception as error:
                failure = dryrun.fork_failure("discard", error, self.guard)
                if failure is not None and self.failure is None:
                    self.failed = None
                    self.failure = plan_failure(
                        failure, "The plan could not be verified: cleaning up its fork failed."
                    )
        self.forks.clear()
        span = self.span
        if tel.is_recording(span):  # attributes only for a span that keeps them
            attributes: dict[str, Any] = {
                contract.PLAN_VALID: self.failure is None and exc is None,
                contract.PLAN_DRY_RUN: self.ran_any,
            }
            if self.failure is not None:
                attributes.update(failure_attributes(self.failure))
                if self.failed is not None:
                    attributes[contract.PLAN_FAILED_STEP] = self.failed
            tel.set_attributes(span, attributes)
            if self.failure is not None:
                tel.set_error(span, self.failure.telemetry_message[:256])
        tel.end_span(span)  # INVALID_SPAN's end does nothing

    def verdict(self) -> PlanVerdict:
        failure = self.failure
        if failure is None:
            return PlanVerdict(tuple(self.verdicts), dry_run=self.ran_any)
        return PlanVerdict(
            tuple(self.verdicts),
            self.failed,
            failure.cause,
            failure.check,
            failure.message,
            self.ran_any,
            failure.model_message,
        )

    # -- one step ------------------------------------------------------------------------------
    def begin(self, i: int) -> Run | None:
        """Check step ``i`` up to its run on the fork; the run to make, or None."""
        try:
            return self._begin(i)
        except RecursionError:
            # The plan's own walks take any depth (plan_walk.py); this is one of a library
            # (a str() of nested lists, a hash of nested tuples): the arguments are at fault.
            return self._fail(
                i, malformed(f"steps[{i}]: its arguments are nested too deeply to check.")
            )

    def _begin(self, i: int) -> Run | None:
        self.notes, self.ran, self.resolved = [], False, {}
        item = self.steps[i]
        name = item.tool if isinstance(item, PlanStep) else "?"
        self._start_span(i, name, item.id if isinstance(item, PlanStep) else None)
        if isinstance(item, PlanError):
            return self._fail(i, malformed(item.message))
        if item.id is not None:
            if item.id in self.ids:
                return self._fail(
                    i,
                    malformed(
                        f"steps[{i}] reuses the id {short_id(item.id)} of "
                        f"steps[{self.ids[item.id]}]."
                    ),
                )
            self.ids[item.id] = i
        entry = self.guard._tools.get(item.tool)
        if entry is None:
            return self._fail(i, self.guard._unknown_tool(item.tool))
        tool, wrapper = entry
        try:
            args = {str(k): read_refs(v, str(k)) for k, v in item.arguments.items()}
        except PlanError as exc:
            return self._fail(i, malformed(exc.message))
        refs = list(refs_in(args))
        failure = self._targets(i, refs) or self._resolve(i, refs)
        if failure is not None:
            return self._fail(i, failure)
        args = replace_refs(args, self.resolved)
        symbolic = {place[0] for place, ref in refs if ref not in self.resolved}
        values, failure = self._schema(tool, args, symbolic, refs)
        if failure is None:
            failure = self._dependencies(i, tool, values)
        if failure is None:
            failure = self._preconditions(i, tool, wrapper, values, symbolic)
        if failure is None:
            failure = self._information(tool, values)
        if failure is not None:
            return self._fail(i, failure)
        run = self._run_for(i, tool, wrapper, values) if self.live else None
        if run is None:
            self._invalidate(i, tool, values)
        return run

    def after(self, i: int, run: Run, outcome: dryrun.Outcome) -> None:
        """Step ``i`` ran on the fork: the environment's answer, and what it produced."""
        tool = run.tool
        self.ran = self.ran_any = True
        failure = self._judge(i, tool, outcome)
        if failure is not None:
            self._fail(i, failure)
            return
        self.results[i] = outcome.result
        try:
            for kind, value in tool.extract(outcome.result):
                key = hashable(value)
                if key is not None:
                    self.produced.produce(kind, key, tool.name, i)
                    self.stale.pop((kind, ("value", key)), None)
            add_leaves(outcome.result, self.seen.add)
        except Exception:
            logger.exception("toolguard: reading the result of %s on the fork failed", tool.name)
        self._invalidate(i, tool, run.values)

    def end(self, i: int) -> None:
        """Step ``i`` is done: its verdict and its span."""
        item = self.steps[i]
        tool = item.tool if isinstance(item, PlanStep) else "?"
        step_id = item.id if isinstance(item, PlanStep) else None
        failure = self.failure if self.failed == i else None
        verdict = PlanStepVerdict(
            i,
            tool,
            step_id,
            failure is None,
            failure.cause if failure is not None else None,
            failure.check if failure is not None else None,
            failure.message if failure is not None else None,
            self.ran,
            tuple(self.notes),
            failure.model_message if failure is not None else None,
        )
        self.verdicts.append(verdict)
        span = self.step_span
        if tel.is_recording(span):
            attributes: dict[str, Any] = {
                contract.PLAN_VALID: failure is None,
                contract.PLAN_RAN_ON_FORK: self.ran,
            }
            if failure is not None:
                attributes.update(failure_attributes(failure))
                tel.set_error(span, failure.telemetry_message[:256])
            tel.set_attributes(span, attributes)
        if span is not INVALID_SPAN:
            tel.end_span(span)
            self.step_span = INVALID_SPAN

    # -- the fork ------------------------------------------------------------------------------
    def _run_for(self, i: int, tool: Tool, wrapper: Any, values: dict[str, Any]) -> Run | None:
        strategy = self._strategy(tool, wrapper)
        instance = wrapper._self_bound_to if wrapper is not None else None
        where = (
            dryrun.placement(tool, strategy, instance, self.guard.state)
            if not isinstance(strategy, str)
            else None
        )
        if isinstance(strategy, str) or where is None:
            reason = strategy if isinstance(strategy, str) else "a fork cannot reach it"
            return self._stop(f"not run on the fork: {reason}")
        # One fork per object, whichever tool forks it: a second one would miss what the
        # earlier steps did there (and a second undo log on it is refused).
        key = id(where.target)
        entry = self.forks.get(key)
        if entry is not None and not _same_kind(entry.strategy, strategy):
            return self._stop(
                f"not run on the fork: its state is forked already by {entry.strategy!r}, "
                f"and {strategy!r} would fork it apart from what the earlier steps did"
            )
        if entry is None:
            try:
                entry = _Fork(strategy, where.target, dryrun.open_fork(strategy, where.target))
            except Exception as exc:
                failure = dryrun.fork_failure("fork", exc, self.guard)
                if failure is not None:
                    return self._fail(i, failure)
                return self._stop("not run on the fork: forking the state failed")
            self.forks[key] = entry
        try:
            call, args, kwargs = dryrun.invocation(
                tool, wrapper.__wrapped__, where, entry.forked, values
            )
        except Exception as exc:
            failure = dryrun.fork_failure("arguments", exc, self.guard)
            if failure is not None:
                return self._fail(i, failure)
            return self._stop("not run on the fork: its arguments could not be copied")
        return Run(tool, call, args, kwargs, values)

    def state_fork(self) -> tuple[Any, Any] | None:
        """(the guard's state, the plan's fork of it) once a step has forked it."""
        entry = self.forks.get(id(self.guard.state))
        if entry is None or entry.view is entry.target:  # in place: the state is its own view
            return None
        return (entry.target, entry.view)

    def _strategy(self, tool: Tool, wrapper: Any) -> ForkStrategy | str:
        """The strategy to run ``tool`` on the fork with, or why it is not run there."""
        name = tool.name
        if tool.spec.external_effects:
            return f"`{name}` acts outside the state (external_effects) and never runs on a fork"
        declared = tool.spec.dry_run
        if declared is False or declared is None:
            return f"`{name}` is declared with dry_run={declared}"
        mode = self.mode
        if mode is not None and not isinstance(mode, bool | Inherit):
            strategy: ForkStrategy = mode
        elif tool.dry_run is not None:
            strategy = tool.dry_run
        elif mode is True:
            strategy = _DEFAULT_FORK
        else:
            return f"`{name}` has no dry run (verify_plan(..., dry_run=True) forks it)"
        if wrapper is None:
            return f"`{name}` is declared by contract alone: the guard cannot run it"
        if tool.is_async and not self.is_async:
            return f"`{name}` is async: use `await guard.averify_plan(...)`"
        return strategy

    def _stop(self, note: str) -> Run | None:
        self.live = False
        self.notes.append(note + "; this and later steps are checked without the fork")
        return None

    def _judge(self, i: int, tool: Tool, outcome: dryrun.Outcome) -> Failure | None:
        failure, _ = dryrun.judge(tool, self.guard, outcome)
        if failure is None or failure.guard_error:
            return failure
        answer = (
            f"{type(outcome.error).__name__}: {shorten_text(dryrun._text(outcome.error), 300)}"
            if outcome.error is not None
            else shorten_text(dryrun._text(outcome.result), 300)
        )
        after = f" after steps[0] to steps[{i - 1}]" if i else ""
        return Failure(
            failure.cause,
            DRY_RUN_CHECK,
            f"{failure.message}{after}",
            f"Run on a copy of the state{after}, `{short_name(tool.name)}` was rejected by the "
            f"environment: {answer}. Change this step, or add before it the steps that make "
            "the state accept it.",
            telemetry_message=failure.telemetry_message,
        )

    def _fail(self, i: int, failure: Failure) -> Run | None:
        """Step ``i`` fails with ``failure`` (None: nothing runs, for ``return``)."""
        tool = self._tool_name(i)
        item = self.steps[i]
        named = f", id {short_id(item.id)}" if isinstance(item, PlanStep) and item.id else ""
        self.failed = i
        self.failure = plan_failure(
            failure, f"steps[{i}] (`{short_name(tool)}`{named}) would fail ({failure.cause}):"
        )
        return None

    def _start_span(self, i: int, tool: str, step_id: str | None) -> None:
        if self.span is INVALID_SPAN:
            return
        name = shorten_text(tool, tel.NAME_LIMIT)
        attributes: dict[str, Any] = {
            contract.GEN_AI_OPERATION_NAME: contract.OPERATION_VERIFY_PLAN,
            contract.GEN_AI_TOOL_NAME: name,
            contract.PLAN_STEP: i,
        }
        if step_id is not None:
            attributes[contract.PLAN_STEP_ID] = step_id[: tel.NAME_LIMIT]
        parent = trace.set_span_in_context(self.span)
        self.step_span = tel.start_span(
            self.guard.tracer, contract.plan_step_span_name(name), parent, attributes
        )


def _same_kind(a: ForkStrategy, b: ForkStrategy) -> bool:
    """Whether a fork ``a`` made can stand for one ``b`` would make: the same strategy, or
    two of the built-in ones that hold no settings of their own."""
    return a is b or (type(a) is type(b) and type(a) in (DeepCopyFork, UndoLogFork))


def verify(guard: Guard, steps: Any, trajectory: Trajectory | None, dry_run: Any) -> PlanVerdict:
    """``guard.verify_plan``: a sync tool on the fork runs inline; an async one is not run."""
    checker = PlanRun(guard, steps, trajectory, dry_run, is_async=False)
    with checker:
        for i in range(len(checker.steps)):
            run = checker.begin(i)
            if run is not None:
                token = tel.attach_recording(checker.step_span)
                try:
                    outcome = dryrun.run(
                        run.call, run.args, run.kwargs, checker.traj or True, checker.state_fork()
                    )
                finally:
                    tel.detach(token)
                checker.after(i, run, outcome)
            checker.end(i)
            if checker.failure is not None:
                break
    return checker.verdict()


async def averify(
    guard: Guard, steps: Any, trajectory: Trajectory | None, dry_run: Any
) -> PlanVerdict:
    """``guard.averify_plan``: :func:`verify` that awaits async tools on the fork."""
    checker = PlanRun(guard, steps, trajectory, dry_run, is_async=True)
    with checker:
        for i in range(len(checker.steps)):
            run = checker.begin(i)
            if run is not None:
                token = tel.attach_recording(checker.step_span)
                try:
                    outcome = await dryrun.arun(
                        run.call, run.args, run.kwargs, checker.traj or True, checker.state_fork()
                    )
                finally:
                    tel.detach(token)
                checker.after(i, run, outcome)
            checker.end(i)
            if checker.failure is not None:
                break
    return checker.verdict()
