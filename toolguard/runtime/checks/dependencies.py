"""The dependency stage: an argument declared in ``refs`` must hold a live value of its kind,
produced earlier in the trajectory (or bound by the application)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ... import _contract as contract
from ..tools.conditions import shorten
from ..tools.places import resolve_path
from ..tools.tool import Tool
from ..trajectories.trajectory import Trajectory
from ..verdict import NAME_LIMIT, Failure, shorten_text
from .guard_error import settled
from .stage import CheckStage

if TYPE_CHECKING:
    from ..calls.call import _Call

_COLLECTIONS = (list, tuple, set, frozenset)
_NONE: dict[Any, Any] = {}


def dependency_stage(tool: Tool) -> CheckStage | None:
    """The tool's dependency check, or None when it declares no reference."""
    name = tool.name
    refs = tuple(tool.refs.items())
    paths = tuple(tool.ref_paths)
    if not refs and not paths:
        return None

    def check(
        call: _Call, values: Mapping[str, Any], stop: bool, unvalidated: bool
    ) -> list[Failure] | None:
        traj = call._traj
        if traj is None:  # outside a trajectory nothing is bound: nothing to check against
            return None
        if not paths:
            # Every reference holds one live value (most calls): answered from the bindings
            # directly; anything else (absent, stale, a collection) goes through ref_failure.
            by_kind = traj._bindings.by_kind
            for arg, kind in refs:
                value = values.get(arg)
                if value is None:  # an optional reference left out refers to nothing
                    continue
                if isinstance(value, _COLLECTIONS):
                    break
                try:
                    binding = by_kind.get(kind, _NONE).get(value)
                except TypeError:
                    break
                if binding is None or not binding.live:
                    break
            else:
                return None
        found: list[Failure] = []
        for arg, kind in refs:
            value = values.get(arg)
            if value is None:  # an optional reference left out refers to nothing
                continue
            failure = ref_failure(name, traj, arg, kind, value)
            if failure is not None:
                found.append(failure)
                if stop:  # blocking stops at the first failure (PROTOCOL 2)
                    return settled(call, found)
        for label, root, parts, kind in paths:
            failure = path_failure(name, traj, label, values.get(root), parts, kind)
            if failure is not None:
                found.append(failure)
                if stop:
                    break
        return settled(call, found)

    if len(refs) == 1 and not paths:
        ((one_arg, one_kind),) = refs

        def check_one(
            call: _Call, values: Mapping[str, Any], stop: bool, unvalidated: bool
        ) -> list[Failure] | None:
            # One reference (most tools that declare any): its live value answered here;
            # anything else (stale, absent, a collection, unhashable) by check above.
            traj = call._traj
            if traj is None:
                return None
            value = values.get(one_arg)
            if value is None:
                return None
            if not isinstance(value, _COLLECTIONS):
                try:
                    binding = traj._bindings.by_kind.get(one_kind, _NONE).get(value)
                except TypeError:
                    binding = None
                if binding is not None and binding.live:
                    return None
            return check(call, values, stop, unvalidated)

        return check_one
    return check


def ref_failure(tool: str, traj: Trajectory, arg: str, kind: str, value: Any) -> Failure | None:
    """The first item of ``value`` (itself, or each item of a collection) that is no live
    ``kind``: its failure, or None."""
    for item in value if isinstance(value, _COLLECTIONS) else (value,):
        failure = _dependency(tool, traj, arg, kind, item)
        if failure is not None:
            return failure
    return None


def path_failure(
    tool: str, traj: Trajectory, label: str, value: Any, parts: tuple[str, ...], kind: str
) -> Failure | None:
    """``ref_failure`` for the values a path (``arg[].field``) reaches inside ``value``."""
    for item in resolve_path(value, parts):
        failure = _dependency(tool, traj, label, kind, item)
        if failure is not None:
            return failure
    return None


def _dependency(tool: str, traj: Trajectory, arg: str, kind: str, value: Any) -> Failure | None:
    binding = traj.lookup(kind, value)
    if binding is not None and binding.live:
        return None
    shown = shorten(value)
    # Only values the model has seen: never ids the application bound without showing them
    # (another user's, say: `traj.bind(..., shown=False)`).
    candidates = traj.live_values(kind, shown_only=True)
    unread = None if candidates else traj._bindings.unread.get(kind)
    if candidates:
        values = ", ".join(shorten(c) for c in candidates[:8])
        offer = f"Use one of the {kind} values you have: {values}."
    elif unread is not None:
        # The model called the producer; its tool answered in a form the guard could not
        # read (calls/record.py): not a reason to call it again.
        tool_shown = shorten_text(unread, NAME_LIMIT)
        offer = (
            f"No {kind} was recorded: `{tool_shown}` returned its result as a one-shot "
            f"iterator, which the guard cannot read (the application's tool must return a "
            f"list); calling it again will not help."
        )
    else:
        offer = f"No {kind} is known yet: first call a tool that returns one."
    if binding is not None:
        by = binding.invalidated_by or "an earlier call"
        return Failure(
            contract.DEPENDENCY,
            f"dependency.{arg}",
            f"{arg}={shown} is a stale {kind}: invalidated by {by}",
            f"`{arg}` refers to {kind} {shown}, which {by} invalidated. {offer}",
            telemetry_message=f"{arg} is a stale {kind}: invalidated by {by}",
        )
    other = traj.kinds_of(value)
    if other:
        return Failure(
            contract.DEPENDENCY,
            f"dependency.{arg}",
            f"{arg}={shown} is a {other[0]}, not a {kind}",
            f"`{arg}` needs a {kind}, but {shown} is a {other[0]}. {offer}",
            telemetry_message=f"{arg} is a {other[0]}, not a {kind}",
        )
    where = shorten_text(traj.id, NAME_LIMIT)  # an id another process may have sent
    why = (
        f" ({shorten_text(unread, NAME_LIMIT)} returned a one-shot iterator, which produces "
        "cannot read: return a list)"
        if unread is not None
        else ""
    )
    return Failure(
        contract.DEPENDENCY,
        f"dependency.{arg}",
        f"{arg}={shown} is no {kind} produced earlier in trajectory {where}{why}",
        f"`{arg}` must be a {kind} taken from an earlier tool result; {shown} is not one. {offer}",
        telemetry_message=f"{arg} is no {kind} produced earlier in trajectory {where}",
    )
