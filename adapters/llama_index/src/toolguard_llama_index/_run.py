"""One agent run in progress: its trajectory, the calls of its model turns, what its tools
returned. Current in the run's context (the workflow's tasks copy it when the run starts)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import toolguard as tg


@dataclass(slots=True)
class _Call:
    call_id: str
    name: str
    kwargs: Mapping[str, Any]
    paused: bool = False  # its attempt waits for an event: its step has its cancelled verdict


@dataclass(slots=True, eq=False)  # by identity: kept in a set until it ends
class Run:
    """``turn``: the model's calls not yet checked, in emission order; ``results``: (tool
    name, raw value) of every call that ran, for the conversation's later runs."""

    traj: tg.Trajectory
    owned: bool
    nested: bool = False  # started by a guarded tool of this trajectory: its calls are no steps
    turn: list[_Call] = field(default_factory=list)
    results: list[tuple[str, Any]] = field(default_factory=list)
    keep: bool = False  # keep ``results`` in the Context's state too (_stored)
    saved: int = 0  # how many of ``results`` the Context's state holds
    restore: bool = False  # bind what the Context's state holds at the first model turn
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_turn(self, calls: list[tuple[str, str, Mapping[str, Any]]]) -> None:
        with self.lock:
            self.turn.extend(_Call(call_id, name, kwargs) for call_id, name, kwargs in calls)

    def claim(self, name: str, kwargs: Mapping[str, Any]) -> str | None:
        """The id of the model's call that this tool call is: the first unchecked call of that
        name with those arguments (LlamaIndex hands a tool the arguments, not the call id;
        two calls alike in both are interchangeable)."""
        with self.lock:
            for index, call in enumerate(self.turn):
                if call.name == name and _same(call.kwargs, kwargs):
                    del self.turn[index]
                    return call.call_id
        return None

    def give_back(self, call_id: str, name: str, kwargs: Mapping[str, Any]) -> None:
        """Return a claimed call to the turn: its attempt paused, and the workflow runs the
        tool again with the same arguments when the run resumes, which claims it anew."""
        with self.lock:
            self.turn.insert(0, _Call(call_id, name, kwargs, paused=True))

    def take_unstarted(self) -> list[_Call]:
        """The calls of the model that no tool call claimed, now that the run is over (its
        ``max_iterations`` reached on their turn, ...); a paused call's step has its verdict."""
        with self.lock:
            calls, self.turn = [c for c in self.turn if not c.paused], []
        return calls


def _same(expected: Mapping[str, Any], given: Mapping[str, Any]) -> bool:
    try:
        return dict(expected) == dict(given)
    except Exception:  # values that refuse to compare: not this call
        return False


CURRENT: ContextVar[Run | None] = ContextVar("toolguard_llama_index_run", default=None)
# The trajectory of the guarded tool running in this context: an agent run started by that
# tool (an agent used as a tool) is nested in its call, and its turns reserve no steps there.
RUNNING: ContextVar[tg.Trajectory | None] = ContextVar(
    "toolguard_llama_index_running", default=None
)


@contextmanager
def running(pending: tg.PendingCall) -> Iterator[None]:
    """``pending`` entered (its span current, the call nested-aware) while its tool runs."""
    run = CURRENT.get()
    with pending:
        token = RUNNING.set(run.traj if run is not None else None)
        try:
            yield
        finally:
            RUNNING.reset(token)
