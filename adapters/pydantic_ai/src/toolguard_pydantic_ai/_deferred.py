"""Deferred tool calls: where each takes its one step.

- A call of a tool that requires approval (``requires_approval``, kind ``unapproved``) takes
  its step in the run that resumes it with the human's decision: an approved one is checked
  as it runs, a denied one never runs and ends ``cancelled`` there (``blocked`` where the
  guard would block it), like any call of a turn that never starts. (A function tool that
  asks by raising ``ApprovalRequired`` took a step where it raised, ``cancelled``: denied in
  the same trajectory, it takes no second one; approved, it is checked again as it runs.)
- A call of an external tool (``ExternalToolset``, kind ``external``) is checked when the
  model emits it, in that run: the guard can still stop it there, and only there. One it
  blocks is answered with the guard's message (the app never gets it); one it allows leaves
  the run for the app and ends ``cancelled``. Its result, given to a later run, takes no
  second step: that run may be in another trajectory or process, and the emitting run's
  trajectory may have ended (its summary written) before the result exists, so the call
  cannot wait open for it.
"""

from __future__ import annotations

from typing import Any

import toolguard as tg
from pydantic_ai import DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.messages import ToolCallPart

from ._calls import Delivery, take_asked


def decided(
    calls: list[ToolCallPart], results: dict[str, Any], traj: tg.Trajectory
) -> list[ToolCallPart]:
    """Of a resumed response's ``calls``, the ones a human decided on now (``results``: the
    run's deferred tool results by call id): each takes its step here, in emission order.
    (The run's tools are not prepared yet where this is read, so the tool's kind is unknown.)
    Not a denied call whose tool asked by raising ``ApprovalRequired`` in this trajectory:
    it has its step, ended ``cancelled`` where it raised."""
    now = [c for c in calls if isinstance(results.get(c.tool_call_id), ToolApproved | ToolDenied)]
    asked = take_asked(traj, [c.tool_call_id for c in now])
    return [
        c
        for c in now
        if not (c.tool_call_id in asked and isinstance(results[c.tool_call_id], ToolDenied))
    ]


def answers(
    guard: tg.Guard, calls: list[ToolCallPart], traj: tg.Trajectory, how: Delivery
) -> DeferredToolResults | None:
    """Check the external ``calls`` as they leave the run: the answers (the rejection,
    delivered as ``how`` says) to the ones the guard blocks; the rest end ``cancelled``."""
    out = {}
    for call in calls:
        answer = _check_external(guard, call, traj, how)
        if answer is not None:
            out[call.tool_call_id] = answer
    return DeferredToolResults(calls=out) if out else None


def _check_external(guard: tg.Guard, call: ToolCallPart, traj: tg.Trajectory, how: Delivery) -> Any:
    pending = guard.check(call.tool_name, call.args, call_id=call.tool_call_id, trajectory=traj)
    if pending.rejection is not None:
        text = str(pending.rejection)
        if how == "failed":
            return ToolFailed(text)
        if how == "retry":
            return ModelRetry(text)
        return text
    pending.cancel()  # the app runs it: the guard never sees it run, nor how it ended
    return None
