"""Walking a planned step's arguments at any depth: with a stack of our own, not recursion.

The call path takes arguments nested thousands deep (a schema failure or a run, never an
exception), so a plan's walks must too: a recursive walk met RecursionError at a few hundred
levels. A place in the arguments is kept as a chain ``(key, parent)`` rather than a tuple
per level (which would cost memory quadratic in the depth) and spelt out only when asked.
A container found inside itself (a Python plan may hold a cycle) raises :class:`Cyclic`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

Chain = tuple[Any, "Chain"] | None  # (key or index, the parent's chain); None at the root

DESCEND: Final[Any] = object()  # what a visitor returns to have a container walked into
_LEAVE: Final[Any] = object()  # a marker on the stack: the container at hand is left


class Cyclic(ValueError):
    """A container inside itself, at ``place`` (a ValueError, as json.dumps raises for one)."""

    def __init__(self, place: tuple[Any, ...]) -> None:
        super().__init__(place)
        self.place = place


def place_of(chain: Chain) -> tuple[Any, ...]:
    """The keys and indexes from the root to the place ``chain`` stands for."""
    parts = []
    while chain is not None:
        key, chain = chain
        parts.append(key)
    parts.reverse()
    return tuple(parts)


def _items(node: Any) -> list[tuple[Any, Any]] | None:
    """A container's items as (key or index, value); None for anything else."""
    if isinstance(node, Mapping):
        return list(node.items())
    if isinstance(node, list | tuple):
        return list(enumerate(node))
    return None


def rebuild(value: Any, visit: Callable[[Any, Chain], Any]) -> Any:
    """``value`` copied with every mapping as a dict and every list or tuple as a list, each
    node replaced by what ``visit(node, chain)`` returns unless that is :data:`DESCEND`.
    Nodes are visited depth first, in order (what the recursive walk did)."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, Chain]] = [(value, root, 0, None)]
    inside: set[int] = set()  # the containers on the way from the root to the node at hand
    while stack:
        node, into, key, chain = stack.pop()
        if into is _LEAVE:
            inside.discard(node)
            continue
        new = visit(node, chain)
        if new is not DESCEND:
            into[key] = new
            continue
        items = _items(node)
        if items is None:
            into[key] = node
            continue
        if id(node) in inside:
            raise Cyclic(place_of(chain))
        # The keys go in now, in their order; the values as the stack reaches them.
        copy = (
            dict.fromkeys(k for k, _ in items) if isinstance(node, Mapping) else [None] * len(items)
        )
        into[key] = copy
        inside.add(id(node))
        stack.append((id(node), _LEAVE, None, None))
        for k, v in reversed(items):
            stack.append((v, copy, k, (k, chain)))
    return root[0]


def find(value: Any, wanted: type) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every ``wanted`` instance inside ``value`` (in mappings, lists and tuples), depth
    first in order, with its place."""
    stack: list[tuple[Any, Chain]] = [(value, None)]
    inside: set[int] = set()
    while stack:
        node, chain = stack.pop()
        if chain is _LEAVE:
            inside.discard(node)
            continue
        if isinstance(node, wanted):
            yield place_of(chain), node
            continue
        items = _items(node)
        if items is None:
            continue
        if id(node) in inside:
            raise Cyclic(place_of(chain))
        inside.add(id(node))
        stack.append((id(node), _LEAVE))
        for k, v in reversed(items):
            stack.append((v, (k, chain)))
