"""What a replica of a shared trajectory writes to its store: the events its calls make
(``p`` produced, ``i`` invalidated, with bound values encoded as JSON that decodes to an equal
value of the same type, and the writer's sequence number), the finish each closed call
posts, and the flags a call's step is marked pending with (``shared_replica.py`` applies
what it reads back)."""

from __future__ import annotations

import base64
import json
import logging
from typing import TYPE_CHECKING, Any

from ..verdict import Failure
from .bindings import Bindings

if TYPE_CHECKING:
    from ..tools.tool import Tool
    from .shared import SharedTrajectory
    from .shared_replica import Replica

logger = logging.getLogger("toolguard")


class SharedBindings(Bindings):
    """The replica's bindings: what this process's calls bind is applied here at once and
    sent to the store (as events) with the call's finish."""

    __slots__ = ("_traj",)

    def __init__(self, traj: Replica) -> None:
        super().__init__()
        self._traj = traj

    def produce(
        self, kind: str, value: Any, source: str, step: int | None, shown: bool = True
    ) -> None:
        super().produce(kind, value, source, step, shown)
        self._send(kind, [value], source, step, shown)

    def produce_all(self, kind: str, values: list[Any], source: str, step: int | None) -> None:
        super().produce_all(kind, values, source, step)
        self._send(kind, values, source, step, True)

    def invalidate(self, kind: str, value: Any, by: str) -> None:
        super().invalidate(kind, value, by)
        encoded = encode(value)
        if encoded is not _UNSHARABLE:
            traj = self._traj
            traj._out(f"i{json.dumps([traj._token, kind, encoded, by, next(traj._seq)])}")

    def _send(
        self, kind: str, values: list[Any], source: str, step: int | None, shown: bool
    ) -> None:
        traj = self._traj
        encoded = [e for e in map(encode, values) if e is not _UNSHARABLE]
        if len(encoded) < sum(v is not None for v in values) and "value" not in traj._warned:
            traj._warned.add("value")
            logger.warning(
                "toolguard: trajectory %r: a %s value that is no str, int, float, bool, bytes "
                "or tuple of them is bound in this process only (the store keeps JSON)",
                traj._shown_id,
                kind,
            )
        if encoded:
            seq = next(traj._seq)  # the order its writer made it in (shared_replica.py)
            traj._out(f"p{json.dumps([traj._token, kind, encoded, source, step, shown, seq])}")


class Finishing(list[tuple[int, str, str, list[Failure], str | None]]):
    """The replica's verdicts. Every call's verdict is appended here exactly once, when the
    call closes (inline in ``_Call._finish`` for a valid call, by ``Trajectory._record``
    otherwise): for a shared trajectory that append is the call's finish round trip."""

    __slots__ = ("_traj",)

    def __init__(self, traj: SharedTrajectory) -> None:
        super().__init__()
        self._traj = traj

    def append(self, entry: tuple[int, str, str, list[Failure], str | None]) -> None:
        super().append(entry)
        self._traj._finish_call(entry[0], entry[3])


_UNSHARABLE: Any = object()


def pending_flags(tool: Tool | None, observes: bool) -> str:
    """A call's pending flags: ``w`` when its finish may write (it binds, invalidates, or
    the guard records what results show), ``i`` when it may invalidate; empty otherwise."""
    if tool is None:
        return ""
    stages = tool.stages
    if not observes and stages is not None and stages.record is None:
        return ""
    return "wi" if tool.invalidates else "w"


def encode(value: Any) -> Any:
    """A bound value as JSON that decodes to an equal value of the same type."""
    kind = type(value)
    if kind is str or kind is bool or kind is int:
        return value
    if kind is float:
        return (
            value
            if value == value and value not in (float("inf"), float("-inf"))
            else {"f": repr(value)}
        )
    if kind is bytes:
        return {"b": base64.b64encode(value).decode("ascii")}
    if kind is tuple:
        items = [encode(v) for v in value]
        return _UNSHARABLE if any(i is _UNSHARABLE for i in items) else {"t": items}
    return _UNSHARABLE


def decode(value: Any) -> Any:
    if type(value) is dict:
        if "b" in value:
            return base64.b64decode(value["b"])
        if "t" in value:
            return tuple(decode(v) for v in value["t"])
        return float(value["f"])
    return value
