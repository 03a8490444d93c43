"""Fork strategies: how a dry run gets a copy of the state to try a call on.

A dry run (docs/fork-and-plans.md) runs a call on ``strategy.fork(state)`` before the real
execution and always calls ``strategy.discard(forked)`` after it. Two families:

- **copying** strategies (:class:`DeepCopyFork`, a :class:`CallbackFork` by default) return a
  new object; the tool then runs on that object (a method tool on the forked instance, a
  function tool through its ``tg.State`` parameter);
- **in-place** strategies (``in_place = True``: :class:`SQLiteSavepointFork`,
  :class:`UndoLogFork`, or a ``CallbackFork(..., in_place=True)``) isolate the changes some
  other way (a savepoint, an undo log) and the tool runs unchanged on the real objects
  between ``fork`` and ``discard``.

An in-place strategy that can also ``keep(forked)`` (commit what the call did) is
*transactional*: the dry run is then the call itself, run once. Accepted, its effects are
kept and its result is the call's; rejected, they are rolled back and the call is blocked.
No second execution, so the dry run costs only what the transaction costs.

This module imports nothing else of the runtime but its leaves: undolog.py,
fork_sqlite.py (:class:`SQLiteSavepointFork`, re-exported here) and inherit.py.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final, Literal, Protocol, overload, runtime_checkable

__all__ = [
    "DRY_RUN_CHECK",
    "CallbackFork",
    "DeepCopyFork",
    "ForkStrategy",
    "SQLiteSavepointFork",
    "State",
    "UndoLogFork",
    "is_in_place",
    "is_transactional",
    "resolve",
]

from ..._errors import ForkError, ToolDefinitionError
from ..inherit import INHERIT, Inherit
from .sqlite import SQLiteSavepointFork
from .undolog import Journal

DRY_RUN_CHECK: Final = "state.dry_run"  # the check id of every failure a dry run finds


@runtime_checkable
class ForkStrategy(Protocol):
    """How a dry run forks the state: ``fork(state) -> forked``, ``discard(forked)``.

    ``discard`` is always called once per successful ``fork`` (also when the dry run raised).
    An optional class or instance attribute ``in_place = True`` says the strategy isolates
    the dry run's changes without a new object (a savepoint): the tool then runs unchanged.
    An in-place strategy may also have ``keep(forked)``, which commits what the call did:
    the guard then calls exactly one of ``keep`` (the environment accepted the call, which
    is not run again) and ``discard`` (it rejected it: rolled back, the call is blocked).
    Such a strategy may also have ``fork_call(state)``: the guard then opens one call's
    transaction with it instead of ``fork``, which plan verification (several steps on one
    fork) keeps using, so the strategy may do at once what a plain run of one call does.
    """

    def fork(self, state: Any) -> Any: ...

    def discard(self, forked: Any) -> None: ...


class State:
    """``Annotated[T, tg.State]`` on a parameter of a function tool: the guard passes its
    ``state`` there (the fork of it during a dry run). The parameter is hidden from the
    tool's schema; the model never sees or sends it. A direct call may pass it by keyword."""


def is_in_place(strategy: ForkStrategy) -> bool:
    return getattr(strategy, "in_place", False) is True


def is_transactional(strategy: ForkStrategy) -> bool:
    """In place and able to keep what the call did: the dry run is the call itself."""
    return is_in_place(strategy) and callable(getattr(strategy, "keep", None))


class DeepCopyFork:
    """``copy.deepcopy`` of the state; discarding drops the copy. The default where the state
    is a plain Python value (dicts, lists, dataclasses, pydantic models, objects holding them).
    A state holding something that cannot be copied (a lock, a socket, a live connection)
    makes the fork fail: the guard's ``on_guard_error`` policy then decides."""

    in_place: Final = False

    def fork(self, state: Any) -> Any:
        return copy.deepcopy(state)

    def discard(self, forked: Any) -> None:
        return None

    def __repr__(self) -> str:
        return "DeepCopyFork()"


class CallbackFork:
    """A user-supplied pair: ``fork(state) -> forked`` and ``discard(forked)`` (optional).

    ``in_place=True`` when ``fork`` isolates changes without returning a new object (it opens
    a transaction, takes a snapshot...): the tool then runs unchanged on the real objects.
    Otherwise ``fork`` must return a new object, never ``state`` itself: a fork that returns
    the state is a guard error, not a dry run on the real state. ``keep`` (in place only)
    commits what the call did: the dry run is then the call itself (see the module).
    """

    def __init__(
        self,
        fork: Callable[[Any], Any],
        discard: Callable[[Any], Any] | None = None,
        *,
        in_place: bool = False,
        keep: Callable[[Any], Any] | None = None,
    ) -> None:
        for name, value in (("fork", fork), ("discard", discard), ("keep", keep)):
            if not callable(value) and (value is not None or name == "fork"):
                raise ToolDefinitionError(f"CallbackFork: {name} must be callable, not {value!r}")
        if keep is not None and not in_place:
            raise ToolDefinitionError(
                "CallbackFork: keep commits a call run on the real state, so it needs "
                "in_place=True (a copying fork has nothing to keep)"
            )
        self._fork = fork
        self._discard = discard
        self.in_place = bool(in_place)
        if keep is not None:
            self.keep = keep

    def fork(self, state: Any) -> Any:
        return self._fork(state)

    def discard(self, forked: Any) -> None:
        if self._discard is not None:
            self._discard(forked)

    def __repr__(self) -> str:
        name = getattr(self._fork, "__qualname__", type(self._fork).__name__)
        keeps = ", keep=..." if is_transactional(self) else ""
        return f"CallbackFork({name}, in_place={self.in_place}{keeps})"


class UndoLogFork:
    """The state's own objects, journaled: the call runs on them once, inside an undo log
    that records, lazily, only what the call reaches (undolog.py). Accepted, its effects
    stay; rejected, they are rolled back in place. For plain Python state (objects with a
    ``__dict__``, dicts, lists, sets, ``random.Random``), where a copy of the whole state
    costs far more than the call.

    The state is the method's instance or the tool's ``tg.State`` argument; what the call
    changes outside it (a module global, a file) is not journaled. One dry run at a time per
    state: another thread using the same objects meanwhile sees them mid-transaction.
    """

    in_place: Final = True

    def fork(self, state: Any) -> Journal:
        journal = Journal()
        if not journal.track(state):
            raise ForkError(
                f"an undo log has nothing to track in {type(state).__name__!r}: it needs the "
                "tool's state, a method's instance or a tg.State parameter"
            )
        return journal

    def keep(self, forked: Journal) -> None:
        forked.keep()

    def discard(self, forked: Journal) -> None:
        forked.rollback()

    def __repr__(self) -> str:
        return "UndoLogFork()"


@overload
def resolve(
    option: Any, where: str, *, inherits: Literal[False] = False
) -> ForkStrategy | bool | None: ...
@overload
def resolve(
    option: Any, where: str, *, inherits: Literal[True]
) -> ForkStrategy | bool | Inherit | None: ...


def resolve(
    option: Any, where: str, *, inherits: bool = False
) -> ForkStrategy | bool | Inherit | None:
    """A ``dry_run=`` option checked. One meaning per value at every level: ``None`` or
    ``False`` no dry run; ``True`` a dry run with the strategy of the level above where it
    has one, else a deep copy; a strategy, that one; ``tg.INHERIT`` (only where there is a
    level above, ``inherits``) whatever that level says."""
    if option is None or isinstance(option, bool):
        return option
    if option is INHERIT and inherits:
        return option
    if isinstance(option, ForkStrategy):
        return option
    also = ", tg.INHERIT" if inherits else ""
    raise ToolDefinitionError(
        f"{where}: dry_run must be None, True, False{also} or a fork strategy (an object with "
        f"fork(state) and discard(forked), e.g. tg.DeepCopyFork()), not {option!r}"
    )
