"""The rounds of one ``tools/call`` (MCP 2026-07-28, SEP-2322): a server that needs the user's
input first answers ``resultType: "input_required"``, and the host retries the same call
carrying ``inputResponses`` and the echoed ``requestState``, under a new JSON-RPC id.

The rounds are one call, so one step: a round answered ``input_required`` is cancelled, not
finished (the tool has not given its result: no ``produces``, ``invalidates`` or
postconditions), and its step is reserved for the retry, which is checked again (it runs the
tool again, with arguments of the host's) and closed by the final result. A retry is known
by what it carries; it continues a round of the same trajectory, tool and arguments.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import orjson

INPUT_REQUIRED = "input_required"
_MAX_PAUSED = 10_000  # rounds whose retry never came (the user declined): the oldest forgotten


def input_required(result: Any) -> bool:
    """Whether a ``tools/call`` answer (a model or its wire form) asks for the user's input."""
    if isinstance(result, Mapping):
        return result.get("resultType") == INPUT_REQUIRED
    return getattr(result, "result_type", None) == INPUT_REQUIRED


def is_retry(params: Any) -> bool:
    """Whether ``tools/call`` params retry an earlier round (they carry its answers)."""
    return isinstance(params, Mapping) and (
        params.get("inputResponses") is not None or params.get("requestState") is not None
    )


class Rounds:
    """The paused rounds whose retry keeps their step: by a stand-in call id per trajectory,
    tool and arguments (a host that numbers its calls itself carries its own call id or step
    in the retry, which keeps the step without one)."""

    def __init__(self) -> None:
        self._paused: OrderedDict[str, None] = OrderedDict()

    @staticmethod
    def call_id(traj_key: str, name: str, arguments: Any) -> str | None:
        """The stand-in call id of a call's rounds; None for arguments that are not JSON."""
        try:
            text = orjson.dumps([traj_key, name, arguments], option=orjson.OPT_SORT_KEYS)
        except TypeError:
            return None
        return f"toolguard-rounds-{hashlib.sha256(text).hexdigest()[:32]}"

    def pause(self, call_id: str) -> None:
        self._paused[call_id] = None
        self._paused.move_to_end(call_id)
        if len(self._paused) > _MAX_PAUSED:
            self._paused.popitem(last=False)

    def resume(self, call_id: str) -> bool:
        """Whether ``call_id`` names a paused round (forgotten now: the retry takes its step)."""
        return self._paused.pop(call_id, 0) is None
