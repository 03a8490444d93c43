"""How the undo log (undolog.py) records and restores a builtin container, in place.

A container is recorded by a shallow copy that holds its original members, and restored by
putting that copy back into the same container object: the container keeps its identity and
its type (a ``bytearray`` stays one), and each member is again the very object it was, so
nested containers, sharing and cycles come back exactly, whatever the call swapped or
rebuilt. Every step calls the builtin type's own method on the container (``dict.update``,
``list.__setitem__``, ...), never the container's: a subclass's overrides are user code the
journal must not run.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple

_ODict: Final = collections.OrderedDict
_Deque: Final = collections.deque


class Container(NamedTuple):
    """How to copy, list the members of, and restore one kind of container."""

    copy: Callable[[Any], Any]
    members: Callable[[Any], Iterable[Any]]  # of the copy: what the container holds
    restore: Callable[[Any, Any], None]


# Keys of these types need no entering (the journal skips what it holds as atoms anyway).
PLAIN_KEYS: Final = frozenset({str, int, bytes, float, bool, type(None)})


def _dict_members(copy: dict[Any, Any]) -> Iterable[Any]:
    if PLAIN_KEYS.issuperset(map(type, copy)):
        return copy.values()
    return [*copy.values(), *copy]  # an object as a key can change too


def _restore_dict(container: Any, copy: dict[Any, Any]) -> None:
    dict.clear(container)
    dict.update(container, copy)


def _restore_odict(container: Any, copy: dict[Any, Any]) -> None:
    # OrderedDict keeps its order apart from the dict: its own methods, not dict's.
    _ODict.clear(container)
    setitem = _ODict.__setitem__
    for key, value in copy.items():
        setitem(container, key, value)


def _restore_list(container: Any, copy: list[Any]) -> None:
    list.__setitem__(container, slice(None), copy)


def _restore_set(container: Any, copy: set[Any]) -> None:
    set.clear(container)
    set.update(container, copy)


def _restore_bytearray(container: Any, copy: bytes) -> None:
    bytearray.__setitem__(container, slice(None), copy)


def _restore_deque(container: Any, copy: list[Any]) -> None:
    _Deque.clear(container)
    _Deque.extend(container, copy)


DICT_OPS: Final = Container(dict.copy, _dict_members, _restore_dict)
# A subclass's dict.copy would call its own keys() when it overrides __iter__: its items view
# reads the table itself.
_DICT_SUBCLASS: Final = Container(lambda d: dict(dict.items(d)), _dict_members, _restore_dict)
_ORDERED: Final = Container(lambda d: dict(_ODict.items(d)), _dict_members, _restore_odict)
LIST_OPS: Final = Container(list.copy, lambda copy: copy, _restore_list)
_SET: Final = Container(set.copy, lambda copy: copy, _restore_set)
_BYTEARRAY: Final = Container(lambda b: bytes(memoryview(b)), lambda _: (), _restore_bytearray)
_DEQUE: Final = Container(lambda d: list(_Deque.__iter__(d)), lambda copy: copy, _restore_deque)

# A subclass records as its builtin base does; OrderedDict before dict, as it is one.
_BY_BASE: Final = (
    (_ODict, _ORDERED),
    (dict, _DICT_SUBCLASS),
    (list, LIST_OPS),
    (set, _SET),
    (bytearray, _BYTEARRAY),
    (_Deque, _DEQUE),
)
_OPS: dict[type, Container | None] = {
    dict: DICT_OPS,
    list: LIST_OPS,
    set: _SET,
    bytearray: _BYTEARRAY,
    _Deque: _DEQUE,
    _ODict: _ORDERED,
}


def container_ops(cls: type) -> Container | None:
    """How to record a ``cls``; None when it is no builtin mutable container."""
    try:
        return _OPS[cls]
    except KeyError:
        pass
    ops = next((ops for base, ops in _BY_BASE if issubclass(cls, base)), None)
    _OPS[cls] = ops
    return ops
