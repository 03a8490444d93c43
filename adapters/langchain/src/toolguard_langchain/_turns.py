"""Steps for one model turn's tool calls, in the order the model emitted them.

A tool node runs a turn's calls in a thread pool (or as parallel tasks), so their checks
arrive in any order. The first check of a turn that arrives reserves steps for every call
of the turn's ``AIMessage`` by call id; later ones find their id reserved. The calls the
framework refused itself (arguments it could not parse: ``invalid_tool_calls``, answered
without any hook) are counted here too, in the same reservation.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import toolguard as tg

from ._framework import AIMessage, ToolMessage

logger = logging.getLogger("toolguard")


class TurnLedger:
    """Per trajectory, the model turn last accounted and its call ids whose steps are fixed.

    Per turn, not per run: call ids are unique within a turn only (some OpenAI-compatible
    servers send ``call_0, call_1, ...`` every turn). A turn is its ``AIMessage``, by the id
    LangGraph's message reducer gives every message (the object, for a bare ``ToolNode``
    input without ids)."""

    def __init__(self, guard: tg.Guard, messages_key: str = "messages") -> None:
        self.guard = guard
        self.messages_key = messages_key
        self._seen: weakref.WeakKeyDictionary[tg.Trajectory, tuple[Any, set[str]]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def account(self, traj: tg.Trajectory, state: Any, call_id: str) -> None:
        """Fix the steps of the turn that emitted ``call_id`` (once per turn)."""
        messages = messages_of(state, self.messages_key)
        last = messages[-1] if messages else None
        if type(last) is AIMessage:
            calls = last.tool_calls
            # The common turn, one call and nothing refused: its step is simply the next one.
            if len(calls) == 1 and not last.invalid_tool_calls and calls[0].get("id") == call_id:
                return
            # A turn of parallel calls whose steps are fixed already (by its first check).
            entry = self._seen.get(traj)
            if entry is not None and entry[0] == _turn_key(last) and call_id in entry[1]:
                return
        message, answered = _turn_of(messages, call_id)
        if message is None:  # tool calls handed to the node directly: no turn to read
            return
        key = _turn_key(message)
        entry = self._seen.get(traj)
        if entry is not None and entry[0] == key and call_id in entry[1]:
            return
        with self._lock:
            seen = self._turn_seen(traj, key)
            if call_id in seen:
                return
            ids = [
                i
                for c in message.tool_calls
                if (i := c.get("id")) and i not in seen and (i == call_id or i not in answered)
            ]
            refused = _unseen_invalid(message, seen)
            traj.reserve(ids + [i for i, _ in refused])
            seen.update(ids)
            seen.update(i for i, _ in refused)
        self._record_refused(traj, refused)

    def account_last_turn(self, traj: tg.Trajectory, state: Any) -> None:
        """At the end of a run: the calls of its last turn the framework refused (a turn
        with no valid call never reaches a tool node)."""
        messages = messages_of(state, self.messages_key)
        message = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if message is None or not message.invalid_tool_calls:
            return
        with self._lock:
            seen = self._turn_seen(traj, _turn_key(message))
            refused = _unseen_invalid(message, seen)
            traj.reserve([i for i, _ in refused])
            seen.update(i for i, _ in refused)
        self._record_refused(traj, refused)

    def _turn_seen(self, traj: tg.Trajectory, key: Any) -> set[str]:
        # Under the lock: the ids already fixed in turn ``key`` (a new turn starts empty).
        entry = self._seen.get(traj)
        if entry is None or entry[0] != key:
            entry = (key, set())
            self._seen[traj] = entry
        return entry[1]

    def forget(self, traj: tg.Trajectory) -> None:
        with self._lock:
            self._seen.pop(traj, None)

    def _record_refused(self, traj: tg.Trajectory, refused: list[tuple[str, str]]) -> None:
        for call_id, name in refused:
            self.guard.record_rejection(
                name,
                f"the framework could not parse the arguments of {name!r} "
                "(malformed or truncated JSON); the call did not run",
                check="schema.json",
                model_message=(
                    f"Tool call {name} with id {call_id} could not be executed - "
                    "arguments were malformed or truncated."
                ),
                call_id=call_id,
                trajectory=traj,
            )


def messages_of(state: Any, key: str) -> Sequence[Any]:
    # Exact types first: the ABC checks (Mapping, Sequence) cost more than the rest of this.
    if type(state) is dict:
        messages = state.get(key)
    elif type(state) is list:
        messages = state
    elif isinstance(state, Mapping):
        messages = state.get(key)
    else:
        messages = getattr(state, key, None)
    if type(messages) is list or isinstance(messages, Sequence):
        return messages
    return ()


def _turn_of(messages: Sequence[Any], call_id: str) -> tuple[AIMessage | None, set[str]]:
    """The AIMessage that emitted ``call_id``, and the call ids already answered after it
    (a human-in-the-loop rejection, a structured-output reply): those never reach a tool
    node, so they take no step."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage) and any(
            c.get("id") == call_id for c in message.tool_calls
        ):
            return message, answered
    return None, answered


def _turn_key(message: AIMessage) -> Any:
    return message.id or id(message)


def _unseen_invalid(message: AIMessage, seen: set[str]) -> list[tuple[str, str]]:
    # A refused call without an id gets no answer from the framework either; it is left out.
    return [
        (i, c.get("name") or "unknown")
        for c in message.invalid_tool_calls
        if (i := c.get("id")) and i not in seen
    ]
