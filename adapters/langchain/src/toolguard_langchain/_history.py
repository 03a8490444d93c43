"""Earlier turns of a conversation: what their tool results bound, bound again for a new run.

Each ``invoke`` is its own trajectory; the message history (from a checkpointer's thread or
sent back by the caller) holds the earlier turns' ``ToolMessage``s. Before the run's first
call, each result of a tool the guard knows is bound as context (``Trajectory.bind_result``:
its ``produces``, and seen by the information check), so an id the agent was shown in an
earlier turn is a bound value, not a ``dependency`` failure. The result of a tool the guard
does not know (yet: one the middleware declares on its first call) is seen all the same, so
a ``grounded`` argument may take a value it showed.

The value read is the one the call's own judgement read (``_results.message_result``): the
message's artifact; else the tool's own return value when this process ran the call (kept by
call id, bounded, and only while the message text is still the one LangChain made of it);
else its content, JSON text parsed back. What earlier turns invalidated is not replayed: an
id removed in an earlier run is bound again if a result in the history shows it (a missed
``dependency`` failure, never a blocked legal call).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import toolguard as tg

from ._framework import AIMessage, ToolMessage
from ._results import message_result

logger = logging.getLogger("toolguard")

_KEPT = 1024  # raw results kept: the last this many calls whose text LangChain made with str()
_SCALARS = (str, int, float, bool, type(None))


class RawResults:
    """The raw return values of recent calls, by call id, with the text of their message."""

    def __init__(self, size: int = _KEPT) -> None:
        self.size = size
        self._kept: OrderedDict[str, tuple[str, Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, call_id: str, name: str, raw: Any, content: Any) -> None:
        if isinstance(raw, _SCALARS):  # its text is itself: nothing lost
            return
        with self._lock:
            self._kept[call_id] = (name, raw, content)
            self._kept.move_to_end(call_id)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def get(self, message: ToolMessage, name: str) -> tuple[bool, Any]:
        with self._lock:
            kept = self._kept.get(message.tool_call_id)
        # Call ids repeat (call_0 in every turn on some servers): only the same text counts.
        if kept is not None and kept[0] == name and kept[2] == message.content:
            return True, kept[1]
        return False, None


def bind_history(
    guard: tg.Guard, traj: tg.Trajectory, messages: Sequence[Any], raw: RawResults
) -> None:
    """Bind what the tool results in ``messages`` (earlier turns) produce, before any call."""
    names: dict[str, str] | None = None
    for message in messages:
        if not isinstance(message, ToolMessage) or message.status == "error":
            continue
        name = message.name
        if not name:
            if names is None:
                names = _call_names(messages)
            name = names.get(message.tool_call_id, "")
        value = message_result(message, raw.get(message, name))  # as the call read it
        if guard.has_tool(name):
            traj.bind_result(guard.get_tool(name), value)  # never raises
        else:
            # A tool declared on its first call in this process (after a restart, on a
            # stateless server, not yet) or no longer the agent's: it produces nothing the
            # guard knows of, but the agent saw its output, as a call of it in this run is.
            _observe(traj, name, value)


def _observe(traj: tg.Trajectory, name: str, value: Any) -> None:
    try:
        traj.observe(value)
    except Exception:  # an odd value must not stop the run; the agent's answer is unaffected
        logger.exception("toolguard: reading an earlier result of %r failed", name)


def _call_names(messages: Sequence[Any]) -> dict[str, str]:
    return {
        call_id: c["name"]
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if (call_id := c.get("id"))
    }
