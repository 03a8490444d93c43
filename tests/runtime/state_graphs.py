"""Random object graphs and random programs over them, for the undo log's exactness tests.

A graph is built from a seed: dicts, lists, sets, bytearrays, deques, OrderedDicts, tuples and
namedtuples holding containers, objects with a ``__dict__``, objects of slots, a dict subclass
with attributes of its own, ``types.SimpleNamespace`` (a C type's read-only instance dict),
``defaultdict`` (whose ``default_factory`` a program changes); references are shared and
cycles go through the root. A program is a list of small integer tuples that navigate the
graph afresh at every step (so the same program does the same thing on a deep copy) and
mutate, swap, replace and rebuild.

:func:`shape` turns a graph into plain data in which every mutable node, and every tuple, is
numbered at its first visit: two graphs with equal shapes are equal in types, values, dict
order, sharing and cycles; :func:`nodes` lists those objects, so that ``is`` can be checked
place by place.
"""

from __future__ import annotations

import collections
import random
import types
from collections.abc import Iterator
from typing import Any, NamedTuple


class Obj:
    label = "class default"  # an instance value may hide it

    def __init__(self) -> None:
        self.name = "obj"


class Slots:
    __slots__ = ("a", "b")


class Tagged(dict):  # type: ignore[type-arg]
    """A dict subclass with an attribute of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.tag = "t"


class Pair(NamedTuple):
    left: Any
    right: Any


Namespace = types.SimpleNamespace
MUTABLE = (dict, list, set, bytearray, collections.deque, Obj, Slots, Namespace, tuple)
_KINDS = [
    "dict", "list", "set", "bytearray", "deque", "odict", "obj", "slots", "tagged", "ns", "ddict",
]  # fmt: skip
_FACTORIES = (None, list, dict, int)


def _new(kind: str) -> Any:
    return {
        "dict": dict,
        "list": list,
        "set": set,
        "bytearray": bytearray,
        "deque": collections.deque,
        "odict": collections.OrderedDict,
        "obj": Obj,
        "slots": Slots,
        "tagged": Tagged,
        "ns": Namespace,
        "ddict": lambda: collections.defaultdict(list),
    }[kind]()


def _atom(rnd: random.Random) -> Any:
    return rnd.choice([0, 1, -7, 2.5, "s", "", None, True, b"b", (1, "t")])


def _child(rnd: random.Random, nodes: list[Any], tuples: list[Any]) -> Any:
    roll = rnd.random()
    if roll < 0.35:
        return _atom(rnd)
    if roll < 0.5 and tuples:
        return rnd.choice(tuples)
    return rnd.choice(nodes)  # shared, and cyclic whenever it is an ancestor


def _put(node: Any, value: Any, slot: int) -> None:
    """Put ``value`` into ``node`` somewhere (where it can go)."""
    if isinstance(node, dict):
        node[f"k{slot}"] = value
    elif isinstance(node, list | collections.deque):
        node.append(value)
    elif isinstance(node, set):
        if not _is_node(value) and _hashable(value):  # atoms only: a fixed visiting order
            node.add(value)
    elif isinstance(node, bytearray):
        node.append(slot % 256)
    elif isinstance(node, Slots):
        setattr(node, "ab"[slot % 2], value)
    else:
        setattr(node, f"a{slot}", value)
    if isinstance(node, Tagged | Obj) and slot % 3 == 0:
        node.extra = value  # type: ignore[union-attr]
    if isinstance(node, collections.defaultdict):
        node.default_factory = _FACTORIES[slot % len(_FACTORIES)]


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def build(seed: int) -> Any:
    """A random graph; the root is an object or a dict."""
    rnd = random.Random(seed)
    root = Obj() if rnd.random() < 0.5 else {}
    made = [root] + [_new(rnd.choice(_KINDS)) for _ in range(rnd.randint(1, 7))]
    tuples: list[Any] = []
    for _ in range(rnd.randint(0, 3)):
        members = (rnd.choice(made), _atom(rnd))
        tuples.append(Pair(*members) if rnd.random() < 0.5 else tuple(members))
    for node in made:
        for slot in range(rnd.randint(0, 4)):
            _put(node, _child(rnd, made, tuples), slot)
    if isinstance(made[-1], dict | Obj):
        _put(made[-1], root, 9)  # a cycle through the root
    return root


def _members(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        yield from node.keys()
        yield from node.values()
    elif isinstance(node, list | tuple | collections.deque | set | frozenset):
        yield from node
    if hasattr(node, "__dict__") and not isinstance(node, type):
        yield from vars(node).values()
    for name in getattr(type(node), "__slots__", ()):
        if hasattr(node, name):
            yield getattr(node, name)


def nodes(root: Any) -> list[Any]:
    """Every mutable node and tuple reachable from ``root``, in a fixed order."""
    seen: dict[int, Any] = {}
    order: list[Any] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if not _is_node(node) or id(node) in seen:
            continue
        seen[id(node)] = node
        order.append(node)
        stack.extend(reversed([m for m in _members(node) if _is_node(m)]))
    return order


def _is_node(value: Any) -> bool:
    return isinstance(value, MUTABLE)


def shape(root: Any) -> list[Any]:
    """``root``'s graph as plain data, nodes numbered in :func:`nodes` order."""
    order = nodes(root)
    number = {id(node): i for i, node in enumerate(order)}

    def ref(value: Any) -> Any:
        return ("#", number[id(value)]) if _is_node(value) else (type(value).__name__, value)

    out: list[Any] = []
    for node in order:
        kind = type(node).__name__
        if isinstance(node, dict):
            body: Any = [(ref(k), ref(v)) for k, v in node.items()]
        elif isinstance(node, set):
            body = sorted(repr(ref(m)) for m in node)
        elif isinstance(node, bytearray):
            body = bytes(node)
        elif isinstance(node, list | tuple | collections.deque):
            body = [ref(m) for m in node]
        else:
            body = None
        attrs = list(vars(node).items()) if hasattr(node, "__dict__") else []
        if isinstance(node, collections.defaultdict):
            attrs.append(("default_factory", node.default_factory))
        if isinstance(node, Slots):
            attrs += [(n, getattr(node, n)) for n in Slots.__slots__ if hasattr(node, n)]
        out.append((kind, body, [(n, ref(v)) for n, v in attrs]))
    return out


def run(root: Any, program: list[tuple[int, int, int]]) -> None:
    """Mutate the graph: each step picks its nodes among those reachable now."""
    for op, i, v in program:
        reach = [n for n in nodes(root) if not isinstance(n, tuple)]
        node, other = reach[i % len(reach)], reach[(i + v) % len(reach)]
        _step(op % 8, node, other, v)


def _step(op: int, node: Any, other: Any, v: int) -> None:
    if op == 0:  # write a value, or a reference (sharing, cycles)
        _put(node, other if v % 2 else v, v)
    elif op == 1:  # remove something
        _remove(node, v)
    elif op == 2:  # swap two members
        _swap(node)
    elif op == 3:  # replace a member container by a fresh one of the same type
        _replace(node)
    elif op == 4:
        _clear(node)
    elif op == 5 and isinstance(node, Obj):  # the whole instance dict replaced
        node.__dict__ = {"name": f"new{v}", "ref": other}
    elif op == 6 and isinstance(node, Obj | Tagged):
        node.label = v  # type: ignore[union-attr]  # hides (or is) a class attribute
    elif op == 7 and isinstance(node, list):
        node.insert(0, other)


def _remove(node: Any, v: int) -> None:
    if isinstance(node, dict) and node:
        del node[list(node)[v % len(node)]]
    elif isinstance(node, list | collections.deque | bytearray) and node:
        node.pop()
    elif isinstance(node, set) and node:
        node.discard(next(iter(node)))
    elif isinstance(node, Slots) and hasattr(node, "a"):
        del node.a
    elif isinstance(node, Obj | Namespace) and vars(node):
        delattr(node, next(iter(vars(node))))


def _swap(node: Any) -> None:
    if isinstance(node, dict) and len(node) > 1:
        a, b = list(node)[:2]
        node[a], node[b] = node[b], node[a]
    elif isinstance(node, list | bytearray) and len(node) > 1:
        node[0], node[-1] = node[-1], node[0]
    elif isinstance(node, collections.deque) and node:
        node.rotate(1)
    elif isinstance(node, Slots) and hasattr(node, "a") and hasattr(node, "b"):
        node.a, node.b = node.b, node.a


def _replace(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in list(node.items()):
            if type(value) in (list, dict):
                node[key] = type(value)(value)
                return
    elif isinstance(node, list):
        for index, value in enumerate(node):
            if type(value) in (list, dict):
                node[index] = type(value)(value)
                return


def _clear(node: Any) -> None:
    if isinstance(node, dict | list | set | bytearray | collections.deque):
        node.clear()
