"""The calls checked outside any run in progress here (:class:`Orphans`): the runner closed
(its runs ended) while their invocation went on. Each ends with its invocation."""

from __future__ import annotations

from dataclasses import dataclass

import toolguard as tg
from google.adk.tools.tool_context import ToolContext


@dataclass(slots=True)
class _Orphan:
    context: ToolContext
    pending: tg.PendingCall


class Orphans:
    """Open calls by ``id(ToolContext)``. Each entry holds its context, so that id is never
    another context's while the call is open (a collected context's id is reused), and a
    lookup matches the very context the call was checked with."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[int, _Orphan] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, context: ToolContext, pending: tg.PendingCall) -> None:
        stale = self._calls.pop(id(context), None)
        if stale is not None and not stale.pending.done:
            stale.pending.cancel()  # the same context checked again: the first never ended
        self._calls[id(context)] = _Orphan(context, pending)

    def take(self, context: ToolContext) -> tg.PendingCall | None:
        """The open call checked with ``context``, now answered."""
        orphan = self._calls.get(id(context))
        if orphan is None or orphan.context is not context:
            return None
        del self._calls[id(context)]
        return orphan.pending

    def end(self, invocations: set[str] | None) -> None:
        """Cancel the open calls of ``invocations`` (``None``: all), which ended: no tool
        callback will answer them now (the invocation failed or was cancelled first, or a
        plugin ahead of this one answered them, and ADK asks no later plugin)."""
        for key, orphan in list(self._calls.items()):
            if invocations is None or orphan.context.invocation_id in invocations:
                del self._calls[key]
                if not orphan.pending.done:
                    orphan.pending.cancel()
