"""The information stage: an argument declared ``grounded`` must hold a value the trajectory
has seen (the user's words, a tool's output), never a placeholder the model made up."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from ... import _contract as contract
from ..tools.conditions import shorten
from ..tools.tool import Tool
from ..trajectories.trajectory import Trajectory
from ..verdict import Failure
from .guard_error import settled
from .stage import CheckStage

if TYPE_CHECKING:
    from ..calls.call import _Call

_ITEMS = (list, tuple, set, frozenset)
_PLACEHOLDERS = frozenset(
    {
        "",
        "unknown",
        "<unknown>",
        "n/a",
        "na",
        "none",
        "null",
        "tbd",
        "todo",
        "placeholder",
        "xxx",
        "...",
        "?",
        "<placeholder>",
        "your_id_here",
        "example",
    }
)


def information_stage(tool: Tool) -> CheckStage | None:
    """The tool's information check, or None when no argument is grounded."""
    grounded = tool.grounded
    if not grounded:
        return None

    def check(
        call: _Call, values: Mapping[str, Any], stop: bool, unvalidated: bool
    ) -> list[Failure] | None:
        found: list[Failure] = []
        sent = call._sent
        for arg in grounded:
            if arg not in values:
                continue
            # The value as the model wrote it ("72", "red", an ISO date), not as the schema
            # converted it (72.0, Color.RED, a datetime): that is what the user said.
            value = sent[arg] if arg in sent else values[arg]
            placeholder = ungrounded(call._traj, value)
            if placeholder is not None:
                found.append(grounded_failure(arg, value, placeholder))
                if stop:
                    break
        return settled(call, found) if found else found

    return check


def ungrounded(traj: Trajectory | None, value: Any) -> bool | None:
    """None when ``value`` is grounded; else whether it is a placeholder (True) or a value
    the trajectory never saw (False). A list is grounded when each of its items is (the
    names the user listed); an enum member by its value. A value that cannot be rendered as
    text (nested past the interpreter's depth, a ``__str__`` that raises) cannot have been
    said: not grounded."""
    if isinstance(value, _ITEMS):
        for item in value:  # an item that is itself a list is judged as its text: "[...]"
            found = _ungrounded_one(traj, item)
            if found is not None:
                return found
        return None
    return _ungrounded_one(traj, value)


def _ungrounded_one(traj: Trajectory | None, value: Any) -> bool | None:
    if isinstance(value, Enum) and not isinstance(value, str):
        value = value.value
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:  # RecursionError included
        return False
    if is_placeholder(text):
        return True
    return None if traj is None or traj.has_seen(text) else False


def is_placeholder(text: str) -> bool:
    """``"<unknown>"``, ``"TBD"``, ``"{id}"``...: a value the model made up to fill a slot."""
    return text.strip().lower() in _PLACEHOLDERS or (
        len(text) > 1 and text[0] + text[-1] in ("<>", "{}", "[]")
    )


def grounded_failure(arg: str, value: Any, placeholder: bool) -> Failure:
    """A grounded argument holding a placeholder, or a value the trajectory never saw."""
    what = "a placeholder" if placeholder else "a value no user message or tool output has shown"
    return Failure(
        contract.INFORMATION,
        f"information.{arg}",
        f"{arg}={shorten(value)} is {what}",
        f"`{arg}`={shorten(value)} is {what}: do not guess it. "
        "Ask the user for it or look it up with a tool first.",
        telemetry_message=f"{arg} is {what}",
    )
