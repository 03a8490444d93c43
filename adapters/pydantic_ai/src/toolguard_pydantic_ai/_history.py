"""Earlier turns of a conversation (``message_history``): their tool returns bound again.

Each ``agent.run`` is its own trajectory (the adapter's, or one the app opens around the
run), or the app keeps one across the conversation. Before its first call, each successful tool
return in the history, of a tool the guard knows, is bound as context
(``Trajectory.bind_result``: its ``produces``, and seen by the information check), so an id
the agent was shown in an earlier turn is a bound value, not a ``dependency`` failure. The
content is the tool's own return value (the objects, in process) or its JSON form (a history
stored and loaded back), which ``produces`` reads alike. What earlier turns invalidated is
not replayed: a missed ``dependency`` failure at worst, never a blocked legal call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import toolguard as tg
from pydantic_ai.messages import ModelRequest, ToolReturnPart


def bind_history(guard: tg.Guard, traj: tg.Trajectory, messages: Sequence[Any]) -> None:
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if (
                isinstance(part, ToolReturnPart)
                and part.outcome == "success"
                and guard.has_tool(part.tool_name)
            ):
                traj.bind_result(guard.get_tool(part.tool_name), part.content)


def returned_tools(messages: Sequence[Any]) -> set[str]:
    """The names of the tools whose returns the history holds."""
    return {
        part.tool_name
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.outcome == "success"
    }
