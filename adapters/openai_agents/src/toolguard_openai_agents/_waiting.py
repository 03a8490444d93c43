"""The calls of a run whose steps are reserved and that no guarded tool has checked yet.

``reserve_turn`` takes a turn's steps as soon as the model answers, and a call claims its
step when the guard checks it in the tool's body. A call that never gets there would keep its
step, counted in T, with no verdict or span: the run gave up on it first (``result.cancel()``,
a sibling's exception that stops the run, a stream left unread), or the SDK answered it
without running the tool (a tool input guardrail's refusal, a rejected approval). So
``guarded_run`` (and ``run`` / ``run_sync``) opens a :class:`Waiting` for its block, and each
such call is checked and ends ``cancelled`` (``blocked`` when its checks say so):

- at the run's next model call (``on_llm_start``), for the calls of the turns before it,
  which the SDK has finished with by then: judged on the state they were issued in, before
  the next turn's calls change it; likewise when the run has its final output (``on_end``,
  a tool's output may be it);
- when the block ends, for the rest, except a call paused for a human's approval in a
  trajectory the block was given (``trajectory=``): the run returned with it pending
  (``result.interruptions``), and the run that resumes it takes its step. It stays reserved,
  and a later block on the same trajectory ends it if it never runs. A trajectory the block
  opened itself ends with it, where no later run can take the step: its paused calls end
  there too (a run resuming the state in a new trajectory counts them again there).

Which calls are paused: ``run`` / ``run_sync`` read the result's interruptions. Around your
own ``Runner`` call the block knows less: a call of a tool that may ask for approval is taken
as paused unless the block raised or a plain sibling of its turn never reached its tool (the
run gave up on the turn).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import count
from weakref import WeakKeyDictionary

import toolguard as tg

logger = logging.getLogger("toolguard")


@dataclass(frozen=True, slots=True)
class Emitted:
    """A call of a guarded tool as the model emitted it."""

    call_id: str
    name: str
    arguments: str  # the model's JSON text, as the tool's body would have checked it
    approval: bool = False  # the tool may ask a human first (needs_approval)
    held: bool = False  # approval or tool input guardrails: the SDK may stop it on purpose


@dataclass(frozen=True, slots=True)
class _Call:
    guard: tg.Guard
    call: Emitted
    turn: int
    run: object | None  # the run's context object; None: carried over from a paused run


# The calls each open trajectory keeps for a paused run (the approval pending): the next
# Waiting of that trajectory takes them over.
_paused: WeakKeyDictionary[tg.Trajectory, dict[str, _Call]] = WeakKeyDictionary()
_paused_lock = threading.Lock()
_turns = count(1)


class Waiting:
    """The reserved, unchecked calls of one run of ``traj``, in emission order."""

    def __init__(self, traj: tg.Trajectory) -> None:
        self.traj = traj
        self._lock = threading.Lock()  # tool bodies may run in other threads (sync tools)
        with _paused_lock:
            self._calls: dict[str, _Call] = _paused.pop(traj, {})
        self._interrupted: set[str] | None = None

    def add(self, guard: tg.Guard, calls: Iterable[Emitted], *, run: object | None = None) -> None:
        """Calls of one turn whose steps were just reserved; ``run``: the run's context."""
        turn = next(_turns)
        with self._lock:
            for call in calls:
                self._calls.setdefault(call.call_id, _Call(guard, call, turn, run))

    def claim(self, call_id: str) -> None:
        """The call reached its tool's guard: it ends there, not here."""
        with self._lock:
            self._calls.pop(call_id, None)

    def turn_over(self, run: Callable[[object], bool]) -> None:
        """A run (``run`` says which of the calls' run objects are its) is calling the model
        again or has its final output: the SDK is done with its earlier turns' calls, so one
        still waiting was answered without its tool running. Calls carried over from a
        paused run belong to whichever run comes next."""
        with self._lock:
            done = {k: c for k, c in self._calls.items() if c.run is None or run(c.run)}
            for call_id in done:
                del self._calls[call_id]
        self._end(done)

    def interrupted(self, call_ids: Collection[str]) -> None:
        """The run returned paused on these calls' approvals (``result.interruptions``)."""
        with self._lock:
            self._interrupted = set(call_ids)

    def close(self, *, raised: bool, keep_paused: bool = True) -> None:
        """End every call still waiting, except the ones paused for an approval, which the
        trajectory keeps for the run that resumes them; once (a second close finds none).
        ``raised``: the block ends by an exception (nothing is paused then).
        ``keep_paused`` False: the trajectory ends with the block, so no later run of it can
        take a paused call's step, and the paused calls end here too."""
        with self._lock:
            calls, self._calls = self._calls, {}
            interrupted = self._interrupted
        given_up = {c.turn for c in calls.values() if not c.call.held}
        paused: dict[str, _Call] = {}
        if keep_paused and not raised:
            for call_id, waiting in calls.items():
                if interrupted is not None:
                    keep = call_id in interrupted
                else:
                    keep = waiting.call.approval and waiting.turn not in given_up
                if keep:
                    paused[call_id] = _Call(waiting.guard, waiting.call, waiting.turn, None)
        if paused and not self.traj.ended:
            with _paused_lock:
                _paused.setdefault(self.traj, {}).update(paused)
        self._end({k: c for k, c in calls.items() if k not in paused})

    def _end(self, calls: dict[str, _Call]) -> None:
        for call_id, waiting in calls.items():
            try:
                waiting.guard.cancel_unstarted(
                    waiting.call.name,
                    waiting.call.arguments,
                    call_id=call_id,
                    trajectory=self.traj,
                )
            except Exception:  # the run goes on (or is over) either way: never fail it for this
                logger.exception("toolguard: could not close the unrun call %r", call_id)


# The open run of this context: set by guarded_run, copied into the SDK's tasks with the rest
# of the context, so the hooks and tool bodies of the run find the same object.
CURRENT: ContextVar[Waiting | None] = ContextVar("toolguard_openai_agents_waiting", default=None)


def claim(call_id: str | None) -> None:
    waiting = CURRENT.get()
    if waiting is not None and call_id is not None:
        waiting.claim(call_id)


def turn_over(traj: tg.Trajectory, context: object) -> None:
    """``on_llm_start``: ``context`` is the run's own context object, the one its turns'
    calls were added with."""
    waiting = CURRENT.get()
    if waiting is not None and waiting.traj is traj:
        waiting.turn_over(lambda run: run is context)


def run_ended(traj: tg.Trajectory, context: object) -> None:
    """``on_end``: the SDK hands the hook a new context object that shares the run's
    ``usage`` (a public field), which tells the run apart."""
    usage = getattr(context, "usage", None)
    waiting = CURRENT.get()
    if usage is not None and waiting is not None and waiting.traj is traj:
        waiting.turn_over(lambda run: getattr(run, "usage", None) is usage)
