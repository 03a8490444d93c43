"""Earlier turns of a conversation: what their tool outputs bound, bound again for a new run.

Each ``Runner.run`` is its own trajectory. The model's input holds the earlier turns
(``result.to_input_list()`` sent back, or a ``Session``'s items, which the SDK prepends):
``function_call`` / ``function_call_output`` items. At the trajectory's first model call
(``on_llm_start``, before any tool runs), each output of a tool the guard knows is bound as
context (``Trajectory.bind_result``: its ``produces``, and seen by the information check), so
an id the agent was shown in an earlier turn is a bound value, not a ``dependency`` failure.
The user's messages there (a message list as input, or a Session's earlier turns) are what
the agent was told: seen by the information check, as a text input is.

The value read: the tool's own return value when this process ran the call (kept by call
id, bounded, and only while the output is still ``str()`` of it, which is what the SDK sent),
so an ``int`` id is bound as the ``int`` a later call passes; else the output text, JSON
parsed back. A ``str()`` of a list or dict is Python, not JSON, and is never evaluated: after
a restart such an output is seen (information check) but binds nothing. Text that reads as a
number or a bool (``8923``, ``True``) is bound both as the text and as that value, since
which one the tool returned is no longer known. What earlier turns invalidated is not
replayed: a missed ``dependency`` failure at worst, never a blocked legal call.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import toolguard as tg

from ._sdk import RunState

logger = logging.getLogger("toolguard")

_KEPT = 1024  # the raw results of the last this many guarded calls, in this process
_BOOLS = {"True": True, "False": False, "true": True, "false": False}


class RawResults:
    def __init__(self, size: int = _KEPT) -> None:
        self.size = size
        self._kept: OrderedDict[str, tuple[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, call_id: str | None, name: str, raw: Any) -> None:
        # A str's text is itself; None binds nothing. An int's text is not the int.
        if not call_id or raw is None or isinstance(raw, str):
            return
        with self._lock:
            self._kept[call_id] = (name, raw)
            self._kept.move_to_end(call_id)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def get(self, call_id: str, name: str, output: str) -> tuple[bool, Any]:
        with self._lock:
            kept = self._kept.get(call_id)
        if kept is None or kept[0] != name:
            return False, None
        try:
            # Call ids repeat (call_0 every turn on some servers): only the same text counts.
            same = str(kept[1]) == output
        except Exception:
            same = False
        return (True, kept[1]) if same else (False, None)


RAW = RawResults()


def bind_history(guard: tg.Guard, traj: tg.Trajectory, items: Sequence[Any]) -> None:
    """Bind what the function call outputs among ``items`` (earlier turns) produce, and
    observe the user's messages among them."""
    names = {
        item.get("call_id"): item.get("name")
        for item in items
        if isinstance(item, Mapping) and item.get("type") == "function_call"
    }
    for item in items:
        if not isinstance(item, Mapping):
            continue
        for text in _user_texts(item):
            traj.observe(text)
        if item.get("type") != "function_call_output":
            continue
        call_id, output = item.get("call_id"), item.get("output")
        name = names.get(call_id)
        if not isinstance(call_id, str) or not isinstance(name, str):
            continue
        if not isinstance(output, str):  # structured output (images, files): no values
            continue
        if not guard.has_tool(name):
            # A tool the guard does not know (an MCP server's, a hosted one): nothing to bind
            # by its contract, but the model saw its output, which grounds a later value.
            for candidate in _parsed(output):
                traj.observe(candidate)
            continue
        found, value = RAW.get(call_id, name, output)
        tool = guard.get_tool(name)
        for candidate in [value] if found else _parsed(output):
            traj.bind_result(tool, candidate)


def _user_texts(item: Mapping[str, Any]) -> list[str]:
    """The text of a user message item: ``content`` as a string or its ``input_text`` parts.
    Only the user's role: what the model or the developer wrote is no information the user
    gave (the protocol counts the user's input and tool outputs as seen)."""
    if item.get("role") != "user" or item.get("type", "message") != "message":
        return []
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        part["text"]
        for part in content
        if isinstance(part, Mapping)
        and part.get("type") == "input_text"
        and isinstance(part.get("text"), str)
    ]


def _parsed(text: str) -> list[Any]:
    """What an output text may have been: JSON parsed back, and a number or a bool (whose
    ``str()`` the SDK sent) as itself besides the text."""
    if text[:1] in ("{", "["):
        try:
            return [json.loads(text)]
        except ValueError:
            return [text]
    if text in _BOOLS:
        return [text, _BOOLS[text]]
    try:
        number = json.loads(text)
    except ValueError:
        return [text]
    return [text, number] if isinstance(number, int | float) else [text]


def state_items(state: RunState[Any, Any]) -> list[Any]:
    """The input items of a run paused in ``state``: its original input and the items the
    run generated (an approval request is no input item, and is left out).

    RunState has no public accessor for them (``to_json`` also serialises the user's context
    and may raise): its fields of openai-agents 0.24, pinned by
    tests/test_oa_conversations.py::test_the_run_state_fields_a_resume_reads."""
    if not (hasattr(state, "_original_input") and hasattr(state, "_generated_items")):
        logger.warning(
            "toolguard: this openai-agents RunState lacks the fields the adapter reads; what "
            "the run showed before it paused is not bound (its approved calls may be blocked)"
        )
        return []
    original = state._original_input
    items: list[Any] = []
    if isinstance(original, str):
        items.append({"role": "user", "content": original})
    else:
        items.extend(original)
    for item in state._generated_items:
        try:
            items.append(item.to_input_item())
        except Exception:  # what cannot be model input (the approval request) showed nothing
            continue
    return items
