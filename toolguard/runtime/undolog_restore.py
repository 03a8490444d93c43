"""Putting back what an undo log recorded of a container (undolog.py), in place.

A container of plain data was recorded as ``marshal`` bytes (:class:`Frozen`); it is restored
from a fresh copy of them, reusing the nested containers the call did not replace, so their
identities and the sharing between them are kept. Any other container was recorded as a
shallow copy, put back as it was.
"""

from __future__ import annotations

import marshal
from typing import Any, Final

_ABSENT: Final = object()


class Frozen:
    """A container's contents as ``marshal`` wrote them (plain data only)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def restore(container: Any, copy: Any) -> None:
    if isinstance(copy, Frozen):
        _thaw(container, marshal.loads(copy.data), {}, {id(container)})
    elif isinstance(container, dict):
        container.clear()
        container.update(copy)
    elif isinstance(container, list | bytearray):
        container[:] = copy
    else:  # set, deque
        container.clear()
        (container.update if isinstance(container, set) else container.extend)(copy)


def _thaw(container: Any, before: Any, placed: dict[int, Any], used: set[int]) -> None:
    """Put ``before`` (a fresh copy of what ``container`` held) back into it, in place. A
    nested dict or list still found at the same key or index is restored in place too, so
    its identity is kept; one the call replaced gets the copy. ``placed``: what each piece
    of the copy became (by id), so that what was shared stays shared; ``used``: the ids of
    the real containers already restored."""
    if isinstance(container, dict):
        was = dict(container)
        container.clear()
        for key, value in before.items():
            container[key] = _reuse(was.get(key, _ABSENT), value, placed, used)
    elif isinstance(container, list):
        old = list(container)
        container[:] = [
            _reuse(old[i] if i < len(old) else _ABSENT, v, placed, used)
            for i, v in enumerate(before)
        ]
    else:  # a set: nothing mutable inside
        container.clear()
        container.update(before)


def _reuse(current: Any, value: Any, placed: dict[int, Any], used: set[int]) -> Any:
    kind = type(value)
    if kind is not dict and kind is not list:
        return value
    found = placed.get(id(value))
    if found is not None:
        return found
    if type(current) is not kind or id(current) in used:
        placed[id(value)] = value
        return value
    placed[id(value)] = current
    used.add(id(current))
    _thaw(current, value, placed, used)
    return current
