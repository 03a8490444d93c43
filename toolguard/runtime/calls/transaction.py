"""A dry run that is the call itself: a transactional fork strategy (fork.py) runs it once.

With an in-place strategy that can ``keep`` (``tg.UndoLogFork``, ``tg.SQLiteSavepointFork``,
a ``CallbackFork(..., in_place=True, keep=...)``), ``wrappers.execute`` hands an admitted
call to :func:`run` (or :func:`arun`) instead of trying it on a fork and then running it
again: the call runs inside the strategy's transaction, with its span current as a real call.

- The environment accepts it: ``keep``, and its result is the call's result.
- It rejects it (raises, or returns what ``error_result`` calls an error): block mode rolls
  it back with ``discard`` and blocks the call (cause ``state_consistency``, check
  ``state.dry_run``, the environment's own message), as a copying dry run would; log mode
  keeps it and records the rejection, since the call would have run anyway.
- The strategy fails: opening the transaction, recording what the call reaches while it
  runs (a ``ForkError`` the call raised, or an undo log that failed even if the tool caught
  the error), or keeping it. What the call did is rolled back, and ``on_guard_error``
  decides: fail closed blocks the call in block mode and records the failure in log mode;
  either way, or when failing open, an unblocked call runs as if no dry run were
  configured (:data:`RUN_PLAIN`), unless what it did could not be undone (a failed keep
  whose discard failed too): then it is not run again, its outcome stands. The span says
  ``dry_run=guard_error``: it is never the environment's rejection.

The strategy is opened with its optional ``fork_call(state)`` when it has one (else
``fork``): it then knows it forks for one call, kept or discarded at once, and not for a
plan whose later steps run on the same fork (``SQLiteSavepointFork`` carries out the tool's
COMMIT only then).

A cancellation (not an ``Exception``) rolls the call back and propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ... import _contract as contract
from ..._errors import ForkError, ToolCallRejected
from ..forks.undolog import Journal
from ..telemetry import spans as tel
from .dry_run import GUARD_ERROR, REJECTED, Outcome, _in_dry_run, fork_failure, judge, placement

if TYPE_CHECKING:
    from ..tools.tool import Tool
    from ..verdict import Failure
    from .call import _Call

logger = logging.getLogger("toolguard")

RUN_PLAIN: Final = object()  # the transaction could not be had and the guard fails open


def applies(tool: Tool) -> bool:
    """Whether ``tool``'s dry run is the call itself (and not inside another dry run)."""
    return tool.transactional and not _in_dry_run.get()


class _Transaction:
    """One call's transaction: opened at creation, then kept or rolled back exactly once."""

    def __init__(self, pending: _Call) -> None:
        tool = pending._tool
        assert tool is not None and tool.dry_run is not None
        self.pending = pending
        self.tool = tool
        self.strategy: Any = tool.dry_run
        self.forked: Any = None
        self.open = False
        self.error: Exception | None = None
        self._dry: Any = None  # the _in_dry_run token while the call runs
        where = placement(tool, self.strategy, pending._instance, pending._state_value())
        try:
            assert where is not None  # an in-place strategy always has a place
            # One call, kept or discarded right after: a strategy may then do at once what
            # a plain run does (SQLite carries out the tool's COMMIT), which plan
            # verification, running later steps on the same fork, must hold back.
            opener = getattr(self.strategy, "fork_call", None)
            fork = opener if callable(opener) else self.strategy.fork
            self.forked = fork(where.target)
            self.open = True
        except Exception as exc:
            self.error = exc

    def begin(self) -> tuple[list[Any], dict[str, Any]]:
        """The call is about to run in the transaction: its arguments."""
        args, kwargs = self.pending.call_parts()
        self.pending._enter()
        self._dry = _in_dry_run.set(True)
        return args, kwargs

    def _ran(self) -> None:
        _in_dry_run.reset(self._dry)

    def close(self, keep: bool) -> Exception | None:
        """Keep or roll back; the strategy's exception, if it raised."""
        if not self.open:
            return None
        self.open = False
        return self._call(self.strategy.keep if keep else self.strategy.discard)

    def _call(self, method: Callable[[Any], Any]) -> Exception | None:
        try:
            method(self.forked)
        except Exception as exc:
            return exc
        return None

    def record(self, outcome: str) -> None:
        if self.pending._recording:
            tel.set_attributes(self.pending._span, {contract.DRY_RUN: outcome})

    def fork_failed(self, dispatch: bool) -> Any:
        """The transaction could not be opened: the guard-error policy decides."""
        assert self.error is not None
        return self._guard_error("fork", self.error, dispatch)

    def _guard_error(self, what: str, exc: Exception, dispatch: bool) -> Any:
        """The strategy failed (the call, if it ran, already undone): blocked, or
        :data:`RUN_PLAIN` when failing open or in log mode (the failure then recorded)."""
        pending = self.pending
        failure = fork_failure(what, exc, pending._guard)
        self.record(GUARD_ERROR)
        if failure is None:
            return RUN_PLAIN
        if pending._mode == "log":  # log mode runs every call: the failure is recorded
            pending._failures += (failure,)
            return RUN_PLAIN
        return _block(pending, failure, dispatch)

    def _broken(self, outcome: Outcome) -> Exception | None:
        """The strategy's own failure while the call ran, whatever the tool made of it."""
        if isinstance(outcome.error, ForkError):
            return outcome.error
        if isinstance(self.forked, Journal):
            return self.forked.failure
        return None

    def _undo(self) -> None:
        undo = self.close(keep=False)
        if undo is not None:
            logger.error("toolguard: rolling back %s failed: %r", self.tool.name, undo)

    def settle(self, outcome: Outcome, dispatch: bool) -> Any:
        """The call ran in the transaction: keep or roll back, and close the call."""
        self._ran()
        pending = self.pending
        broken = self._broken(outcome)
        if broken is not None:
            self._undo()
            pending._leave()
            return self._guard_error("call", broken, dispatch)
        failure, verdict = judge(self.tool, pending._guard, outcome, in_place=True)
        if failure is not None and pending._mode == "block":
            problem = self.close(keep=False)
            pending._leave()
            self.record(verdict if problem is None else GUARD_ERROR)
            if problem is not None:  # blocked, but what it did may stand: said first
                undone = fork_failure("discard", problem, pending._guard)
                if undone is not None:
                    pending._failures += (undone,)
            return _block(pending, failure, dispatch)
        problem = self.close(keep=True)
        if problem is not None:  # the call ran but cannot stand: undone, then the policy
            undo = self._call(self.strategy.discard)
            if undo is None:
                pending._leave()
                return self._guard_error("keep", problem, dispatch)
            # Not undone (a commit the strategy carried out stands): running the call again
            # would do it twice, so it ends here, blocked or, failing open, as it ran.
            logger.error("toolguard: rolling back %s failed: %r", self.tool.name, undo)
            broke = fork_failure("keep", problem, pending._guard)
            if broke is not None and pending._mode == "block":
                pending._leave()
                self.record(GUARD_ERROR)
                return _block(pending, broke, dispatch)
            if broke is not None:
                pending._failures += (broke,)
            verdict = GUARD_ERROR
        self.record(verdict)
        if failure is not None:
            pending._failures += (failure,)  # log mode: recorded, the call stands
        if outcome.error is not None:
            rejection = pending.fail(outcome.error)
            if dispatch:
                return rejection
            raise outcome.error
        # judge() already read the result with error_result: finish() need not read it again
        # (after a guard error it does, so that its own policy records it as before).
        known = None if verdict == GUARD_ERROR else verdict == REJECTED
        pending._leave()
        pending._finish(outcome.result, known)
        return outcome.result

    def abandon(self, exc: BaseException) -> None:
        """A cancellation during the call: rolled back, the call recorded as cancelled."""
        self._ran()
        self._undo()
        if not self.pending.done:
            self.pending.fail(exc)


def _block(pending: _Call, failure: Failure, dispatch: bool) -> Any:
    pending._reject(failure)
    rejection = pending.rejection
    assert rejection is not None
    if dispatch:
        return rejection
    raise ToolCallRejected(rejection)


def run(pending: _Call, fn: Callable[..., Any], dispatch: bool) -> Any:
    """Run an admitted call of a sync tool in its strategy's transaction (module doc)."""
    trial = _Transaction(pending)
    if not trial.open:
        return trial.fork_failed(dispatch)
    args, kwargs = trial.begin()
    try:
        outcome = Outcome(fn(*args, **kwargs), None)
    except Exception as exc:
        outcome = Outcome(None, exc)
    except BaseException as exc:
        trial.abandon(exc)
        raise
    return trial.settle(outcome, dispatch)


async def arun(pending: _Call, fn: Callable[..., Any], dispatch: bool) -> Any:
    """:func:`run` for an async tool."""
    trial = _Transaction(pending)
    if not trial.open:
        return trial.fork_failed(dispatch)
    args, kwargs = trial.begin()
    try:
        outcome = Outcome(await fn(*args, **kwargs), None)
    except Exception as exc:
        outcome = Outcome(None, exc)
    except BaseException as exc:
        trial.abandon(exc)
        raise
    return trial.settle(outcome, dispatch)
