"""A call tried on a fork of the state before it runs (docs/fork-and-plans.md).

``wrappers.execute`` asks :func:`try_on_fork` (or :func:`atry_on_fork` for an async tool)
once the cheap checks have passed: the call runs on ``strategy.fork(state)``; when the
environment rejects it there (it raises, or its result is what ``error_result`` calls an
error), the real call is blocked with cause ``state_consistency`` and check id
``state.dry_run`` (log mode: recorded, and the call runs). The fork is always discarded.

A dry run takes no step, binds nothing and opens no span: the tool's plain function runs
with the call's context marked "inside a tool" (a guarded tool it calls is no step) and
"inside a dry run" (that tool is not tried on a fork of the fork). The call's own span gets
``toolguard.dry_run`` = ``passed``, ``rejected`` or ``guard_error``.

The pieces (where a call's fork goes, opening and closing a fork, judging an outcome) are
shared with plan verification (plan.py), which runs a whole plan on one fork.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

from ... import _contract as contract
from ..._errors import ForkError
from ..checks.guard_error import guard_error
from ..forks.strategies import DRY_RUN_CHECK, ForkStrategy, is_in_place
from ..telemetry import spans as tel
from ..tools.tool import Tool
from ..trajectories.current import current_var
from ..trajectories.nesting import _inside_tool
from ..trajectories.trajectory import Trajectory
from ..verdict import Failure

if TYPE_CHECKING:
    from ..guard import Guard
    from .call import _Call

_in_dry_run: ContextVar[bool] = ContextVar("toolguard_dry_run", default=False)
# While a call runs on a fork of the guard's state: (the real state, its fork). A guarded call
# the tool makes without a state of its own takes the guard's, which must then be the fork:
# the real state would keep what the dry run did.
_state_fork: ContextVar[tuple[Any, Any] | None] = ContextVar("toolguard_state_fork", default=None)

PASSED: Final = "passed"
REJECTED: Final = "rejected"
GUARD_ERROR: Final = "guard_error"

# Values a deep copy may hand back as themselves: running a tool "on" one changes nothing.
_IMMUTABLE = (type(None), str, bytes, int, float, complex, bool, tuple, frozenset)


def active() -> bool:
    """Whether this context is inside a dry run."""
    return _in_dry_run.get()


def seen_state(state: Any) -> Any:
    """``state`` as a call made now sees it: its fork while a dry run runs on one."""
    pair = _state_fork.get()
    return pair[1] if pair is not None and pair[0] is state else state


class Placement(NamedTuple):
    """Where a call's fork goes: ``target`` is what ``strategy.fork`` receives; ``how`` is
    ``state`` (the fork is passed as the tool's ``tg.State`` argument), ``instance`` (the
    method runs on the forked instance) or ``in_place`` (the tool runs unchanged)."""

    target: Any
    how: Literal["state", "instance", "in_place"]


def placement(tool: Tool, strategy: ForkStrategy, instance: Any, state: Any) -> Placement | None:
    """Where ``tool``'s call goes on a fork of ``strategy``; None: a fork cannot reach it."""
    if is_in_place(strategy):
        target = state if tool.state_param or instance is None else instance
        return Placement(target, "in_place")
    if tool.state_param is not None:
        return Placement(state, "state")
    if instance is not None and tool.is_method and tool.fork_fn is not None:
        return Placement(instance, "instance")
    return None


def unreachable(tool: Tool) -> ForkError:
    return ForkError(
        f"a fork cannot reach {tool.name!r}: it has no instance and no tg.State parameter"
    )


def fork_failure(what: str, exc: Exception, guard: Guard) -> Failure | None:
    """The fork machinery raised: a failure (fail closed) or None (fail open, logged)."""
    return guard_error(
        DRY_RUN_CHECK,
        contract.STATE_CONSISTENCY,
        f"the dry run's {what}",
        exc,
        guard.fail_open,
        guard.record_content,
    )


def open_fork(strategy: ForkStrategy, target: Any) -> Any:
    """``strategy.fork(target)``, refusing a copying fork that hands back the state itself
    (the dry run would then change the real state)."""
    forked = strategy.fork(target)
    if forked is target and not is_in_place(strategy) and not isinstance(target, _IMMUTABLE):
        raise ForkError(
            f"{strategy!r} returned the state itself instead of a copy; a strategy that "
            "isolates changes without a copy must say in_place=True"
        )
    return forked


def invocation(
    tool: Tool,
    fn: Callable[..., Any],
    where: Placement,
    forked: Any,
    values: dict[str, Any],
    moved: dict[str, str] | None = None,
) -> tuple[Callable[..., Any], list[Any], dict[str, Any]]:
    """The callable and arguments of one call on a fork. The arguments are copied: a tool
    that changes an argument in place must not change the real call's."""
    try:
        values = copy.deepcopy(values)
    except Exception:  # an argument that cannot be copied (a handle): passed as it is
        values = dict(values)
    call = fn
    if where.how == "state" and tool.state_param is not None:
        values[tool.state_param] = forked
    elif where.how == "instance":
        assert tool.fork_fn is not None
        call = functools.partial(tool.fork_fn, forked)
    elif tool.state_param is not None:  # in place: the tool's state unchanged
        values[tool.state_param] = where.target
    args, kwargs = tool.call_parts(values, moved)
    return call, args, kwargs


class Outcome(NamedTuple):
    result: Any
    error: Exception | None


def run(
    call: Callable[..., Any],
    args: list[Any],
    kwargs: dict[str, Any],
    inside: Any = True,
    state_fork: tuple[Any, Any] | None = None,
) -> Outcome:
    """The call on the fork, marked as a dry run: what it returned or the error it raised.
    ``inside``: the trajectory of the call tried (True when there is none), so that a guarded
    call the tool makes, whichever entry point it uses, is nested in it and takes no step.
    ``state_fork``: (the guard's state, its fork) when the call runs on one.
    A cancellation (not an ``Exception``) propagates."""
    dry = _in_dry_run.set(True)
    fork = _state_fork.set(state_fork)
    nested = _inside_tool.set(inside)
    current = _current(inside)
    try:
        return Outcome(call(*args, **kwargs), None)
    except Exception as exc:
        return Outcome(None, exc)
    finally:
        if current is not None:
            current_var.reset(current)
        _inside_tool.reset(nested)
        _state_fork.reset(fork)
        _in_dry_run.reset(dry)


async def arun(
    call: Callable[..., Any],
    args: list[Any],
    kwargs: dict[str, Any],
    inside: Any = True,
    state_fork: tuple[Any, Any] | None = None,
) -> Outcome:
    """:func:`run` for an async tool (a sync one runs inline)."""
    dry = _in_dry_run.set(True)
    fork = _state_fork.set(state_fork)
    nested = _inside_tool.set(inside)
    current = _current(inside)
    try:
        result = call(*args, **kwargs)
        if hasattr(result, "__await__"):
            result = await result
        return Outcome(result, None)
    except Exception as exc:
        return Outcome(None, exc)
    finally:
        if current is not None:
            current_var.reset(current)
        _inside_tool.reset(nested)
        _state_fork.reset(fork)
        _in_dry_run.reset(dry)


def _current(inside: Any) -> Token[Trajectory | None] | None:
    """While the fork runs, the trajectory of the call tried is the current one: a guarded
    call the tool makes then finds it nested and takes no step, also when the call was given
    a trajectory other than the current one (which it would otherwise count in)."""
    if not isinstance(inside, Trajectory) or current_var.get() is inside:
        return None
    return current_var.set(inside)


def judge(
    tool: Tool, guard: Guard, outcome: Outcome, *, in_place: bool = False
) -> tuple[Failure | None, str]:
    """Whether the environment rejected the call on the fork: (failure, span outcome).
    ``in_place``: the call ran in a transaction on the real state (transaction.py)."""
    tried = _TRIED_IN_PLACE if in_place else _TRIED_ON_COPY
    if isinstance(outcome.error, ForkError):  # the fork's own failure, not the environment's
        return fork_failure("call", outcome.error, guard), GUARD_ERROR
    if outcome.error is not None:
        return exception_rejection(tool.name, outcome.error, tried), REJECTED
    detect = tool.spec.error_result
    if detect is None:
        detect = guard.error_result
    if not detect:
        return None, PASSED
    try:
        error = bool(detect(outcome.result))
    except Exception as exc:
        return fork_failure("error_result predicate", exc, guard), GUARD_ERROR
    if error:
        return result_rejection(tool.name, outcome.result, tried), REJECTED
    return None, PASSED


# How the model's message says the call was tried (the call did not take effect either way).
_TRIED_ON_COPY: Final = "tried first on a copy of the state"
_TRIED_IN_PLACE: Final = "tried in a transaction that was rolled back"


def exception_rejection(tool: str, exc: Exception, tried: str = _TRIED_ON_COPY) -> Failure:
    text = f"{type(exc).__name__}: {_text(exc)}"
    return Failure(
        contract.STATE_CONSISTENCY,
        DRY_RUN_CHECK,
        f"{tool} raised {text} on a dry run",
        f"`{tool}` was not run: {tried}, it was rejected by the "
        f"environment ({text[:300]}). Change the call, or first bring the state to where "
        "it is accepted.",
        telemetry_message=f"{tool} raised {type(exc).__name__} on a dry run",
    )


def result_rejection(tool: str, result: Any, tried: str = _TRIED_ON_COPY) -> Failure:
    text = _text(result)
    return Failure(
        contract.STATE_CONSISTENCY,
        DRY_RUN_CHECK,
        f"the environment rejected {tool} on a dry run: {text[:200]}",
        f"`{tool}` was not run: {tried}, it was rejected by the "
        f"environment: {text[:300]}. Change the call, or first bring the state to where "
        "it is accepted.",
        telemetry_message=f"the environment rejected {tool} on a dry run (an error result)",
    )


def _text(value: Any) -> str:
    """str() of a value whose __str__ may raise or run on."""
    try:
        return str(value)[:2000]
    except Exception:
        return f"<{type(value).__name__}>"


class _Trial:
    """One call's dry run: opened (forked) at creation, run by the caller, then closed."""

    def __init__(self, pending: _Call, fn: Callable[..., Any]) -> None:
        tool = pending._tool
        assert tool is not None and tool.dry_run is not None
        self.pending = pending
        self.tool = tool
        self.strategy: ForkStrategy = tool.dry_run
        self.failure: Failure | None = None
        self.outcome = GUARD_ERROR
        self.call: tuple[Callable[..., Any], list[Any], dict[str, Any]] | None = None
        self.opened = False
        self.forked: Any = None
        self.state_fork: tuple[Any, Any] | None = None
        guard = pending._guard
        where = placement(tool, self.strategy, pending._instance, pending._state_value())
        try:
            if where is None:
                raise unreachable(tool)
            self.forked = open_fork(self.strategy, where.target)
            self.opened = True
            if where.how == "state" and where.target is guard.state:
                self.state_fork = (where.target, self.forked)
            self.call = invocation(tool, fn, where, self.forked, pending.arguments, pending._moved)
        except Exception as exc:
            self.failure = fork_failure("fork", exc, guard)

    def judge(self, outcome: Outcome) -> None:
        self.failure, self.outcome = judge(self.tool, self.pending._guard, outcome)

    def close(self) -> None:
        if not self.opened:
            return
        self.opened = False
        try:
            self.strategy.discard(self.forked)
        except Exception as exc:
            failure = fork_failure("discard", exc, self.pending._guard)
            self.outcome = GUARD_ERROR if self.failure is None else self.outcome
            self.failure = self.failure if self.failure is not None else failure
        finally:
            self.forked = None
            self.state_fork = None

    def settle(self) -> bool:
        """Record the outcome; False when the call is blocked (then already closed)."""
        pending = self.pending
        if pending._recording:
            tel.set_attributes(pending._span, {contract.DRY_RUN: self.outcome})
        if self.failure is None:
            return True
        if pending._mode == "block":
            pending._reject(self.failure)
            return False
        pending._failures += (self.failure,)
        return True

    def abandon(self) -> None:
        """A cancellation inside the dry run: the fork goes, the call ends as cancelled."""
        self.close()
        if not self.pending.done:
            self.pending.cancel()


def try_on_fork(pending: _Call, fn: Callable[..., Any]) -> bool:
    """Dry-run an admitted call of a sync tool; False: it is blocked (``pending`` closed)."""
    if _in_dry_run.get():
        return True  # inside another call's dry run: that fork already isolates this one
    trial = _Trial(pending, fn)
    try:
        if trial.call is not None:
            trial.judge(run(*trial.call, pending._traj or True, trial.state_fork))
    except BaseException:
        trial.abandon()
        raise
    trial.close()
    return trial.settle()


async def atry_on_fork(pending: _Call, fn: Callable[..., Any]) -> bool:
    """:func:`try_on_fork` for an async tool."""
    if _in_dry_run.get():
        return True
    trial = _Trial(pending, fn)
    try:
        if trial.call is not None:
            trial.judge(await arun(*trial.call, pending._traj or True, trial.state_fork))
    except BaseException:
        trial.abandon()
        raise
    trial.close()
    return trial.settle()
