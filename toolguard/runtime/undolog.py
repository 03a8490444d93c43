"""An undo log over plain Python objects: the in-place fork of :class:`UndoLogFork`.

A copying fork costs what the whole state weighs; a call costs what it touches. The undo log
lets the call run on the real objects and records, lazily, how to restore only what the call
reaches, so that keeping the call's effects costs next to nothing and rolling them back
restores the state:

- an object with a ``__dict__`` is *entered*: for the transaction it gets a fresh, empty
  ``__dict__`` and a stand-in class (a subclass with the same layout) whose ``__getattr__``,
  called only for a missing attribute, fetches the value from the real dict the first time
  the call reads it (entering it when it is mutable). Writes land in the fresh dict. Keeping
  merges the fresh dict into the real one; rolling back drops it. Reading an attribute a
  second time costs nothing extra;
- an object whose dict holds only plain values (str, numbers, dates: a file of a file
  system, say) is recorded by a copy of its dict instead: cheaper than a stand-in, and the
  many such objects of one container are checked and copied in one pass in C;
- a builtin container reached (dict, list, set, bytearray, deque) gets a shallow copy of
  itself and of every builtin container inside it; objects inside are entered;
- a ``random.Random`` keeps its ``getstate()``;
- an object whose class cannot wear a stand-in (pydantic models, classes with their own
  metaclass) is entered eagerly: a copy of its dict and its slots, its values entered.

Rolling back restores every recorded container in place (identities are kept). While a call
runs, ``type(obj)`` of an entered object is the stand-in (``isinstance`` and the class's name
are unchanged);
``vars(obj)`` and ``obj.__dict__`` are complete. One transaction at a time per object.
"""

from __future__ import annotations

import abc
import collections
import datetime
import decimal
import enum
import fractions
import itertools
import marshal
import operator
import pathlib
import random
import re
import types
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final

from .._errors import ForkError
from .undolog_restore import Frozen, restore

# Values that cannot change in place: never entered, never copied.
_ATOMS: Final = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    range,
    slice,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    datetime.timezone,
    decimal.Decimal,
    fractions.Fraction,
    uuid.UUID,
    enum.Enum,
    pathlib.PurePath,
    re.Pattern,
)
# The common atoms by exact type: one set lookup instead of an isinstance chain.
_ATOM_TYPES: Final = frozenset(
    {type(None), bool, int, float, complex, str, bytes, datetime.datetime, datetime.date}
)
_CONTAINERS: Final = (dict, list, set, bytearray, collections.deque)
_MARSHALLABLE: Final = frozenset({dict, list, set})  # exact types marshal writes and reads
_PLAIN_METACLASSES: Final = (type, abc.ABCMeta)


class _Kind(enum.Enum):
    ATOM = 1
    TUPLE = 2  # immutable when what it holds is
    CONTAINER = 3
    RANDOM = 4
    OBJECT = 5
    UNTRACKABLE = 6


_KINDS: dict[type, _Kind] = {t: _Kind.ATOM for t in _ATOM_TYPES}


def _kind(cls: type) -> _Kind:
    if cls is tuple or cls is frozenset:
        kind = _Kind.TUPLE
    elif issubclass(cls, _ATOMS):
        kind = _Kind.ATOM
    elif issubclass(cls, _CONTAINERS):
        kind = _Kind.CONTAINER
    elif issubclass(cls, random.Random):
        kind = _Kind.RANDOM
    elif hasattr(cls, "__dictoffset__") and cls.__dictoffset__:
        kind = _Kind.OBJECT
    else:
        kind = _Kind.UNTRACKABLE
    _KINDS[cls] = kind
    return kind


# id(object) -> its transaction: what a stand-in's __getattr__ consults.
_ENTERED: dict[int, _Entry] = {}


def immutable(value: Any) -> bool:
    kind = type(value)
    if kind in _ATOM_TYPES:
        return True
    if kind is tuple or kind is frozenset:
        return all(immutable(v) for v in value)
    return isinstance(value, _ATOMS)


class _Entry:
    """One object entered lazily: its real dict, the fresh one, what it deleted."""

    __slots__ = ("deleted", "fresh", "journal", "real")

    def __init__(self, journal: Journal, real: dict[str, Any], fresh: dict[str, Any]) -> None:
        self.journal = journal
        self.real = real
        self.fresh = fresh
        self.deleted: set[str] = set()

    def fetch(self, obj: Any, name: str) -> Any:
        """The real value of ``name`` (entered), now in the fresh dict; KeyError if none."""
        if name in self.deleted:
            raise KeyError(name)
        value = self.real[name]
        if type(value) not in _ATOM_TYPES:
            self.journal.enter(value, (obj, name))  # which passes over what cannot change
        self.fresh[name] = value
        return value


class _ClassInfo:
    """What entering an instance of a class needs, worked out once per class."""

    __slots__ = ("dict_slot", "shadowable", "standin")

    def __init__(self, cls: type) -> None:
        self.standin: type | None = None
        self.dict_slot: Any = None
        self.shadowable: frozenset[str] = frozenset()
        if type(cls) not in _PLAIN_METACLASSES or _slot_names(cls):
            return  # entered eagerly
        self.dict_slot = next(
            (k.__dict__["__dict__"] for k in cls.__mro__ if "__dict__" in k.__dict__), None
        )
        if self.dict_slot is None or not hasattr(self.dict_slot, "__set__"):
            return
        # Class attributes an instance value may hide: with the instance's dict empty, the
        # class's would show through, so such values are fetched as the object is entered.
        self.shadowable = frozenset(
            name for k in cls.__mro__ for name in k.__dict__ if not name.startswith("__")
        )
        self.standin = _standin(cls, self.dict_slot)


_CLASSES: dict[type, _ClassInfo] = {}
# Classes whose instances can be recorded by a copy of their dict, read with a plain
# attribute lookup: a stand-in fits them and nothing runs on ``obj.__dict__``.
_PLAIN_OBJECTS: set[type] = set()
_GET_DICT: Final = operator.attrgetter("__dict__")
_FEW: Final = 4  # up to this many objects in a container, entering them one by one is faster


def _class_info(cls: type) -> _ClassInfo:
    info = _CLASSES.get(cls)
    if info is None:
        info = _CLASSES[cls] = _ClassInfo(cls)
        if (
            info.standin is not None
            and _KINDS.get(cls) is _Kind.OBJECT
            and cls.__getattribute__ is object.__getattribute__  # type: ignore[comparison-overlap]
            and type(info.dict_slot).__name__ == "getset_descriptor"
        ):
            _PLAIN_OBJECTS.add(cls)
    return info


def _slot_names(cls: type) -> list[str]:
    names: list[str] = []
    for k in cls.__mro__:
        slots = k.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__"):
                names.append(name)
    return names


def _standin(cls: type, dict_slot: Any) -> type:
    fallback = getattr(cls, "__getattr__", None)
    delete: Callable[[Any, str], None] = cls.__delattr__  # type: ignore[assignment]

    def __getattr__(self: Any, name: str) -> Any:
        entry = _ENTERED.get(id(self))
        if entry is not None:
            try:
                return entry.fetch(self, name)
            except KeyError:
                pass
        if fallback is not None:
            return fallback(self, name)
        raise AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")

    def __delattr__(self: Any, name: str) -> None:
        entry = _ENTERED.get(id(self))
        if entry is None:
            delete(self, name)
            return
        written = name in entry.fresh
        unread = name in entry.real and name not in entry.deleted
        if written or not unread:
            delete(self, name)  # raises as usual when there is none
        if unread:
            entry.deleted.add(name)

    def __dict__(self: Any) -> dict[str, Any]:
        entry = _ENTERED.get(id(self))
        fresh: dict[str, Any] = dict_slot.__get__(self)
        if entry is not None:
            for name in entry.real.keys() - fresh.keys() - entry.deleted:
                entry.fetch(self, name)
        return fresh

    namespace = {
        "__slots__": (),
        "__getattr__": __getattr__,
        "__delattr__": __delattr__,
        "__dict__": property(__dict__),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    return type(cls.__name__, (cls,), namespace)


class Journal:
    """What one transaction entered and how to undo it."""

    __slots__ = ("closed", "containers", "eager", "lazy", "randoms", "seen")

    def __init__(self) -> None:
        self.lazy: list[tuple[Any, _ClassInfo, type, _Entry]] = []
        self.eager: list[tuple[Any, dict[str, Any], dict[str, Any], Sequence[tuple[str, Any]]]] = []
        self.containers: list[tuple[Any, Any]] = []
        self.randoms: list[tuple[random.Random, Any]] = []
        self.seen: set[int] = set()
        self.closed = False

    def track(self, root: Any) -> bool:
        """Start the transaction at ``root``; False when it holds nothing that can change."""
        kind = _KINDS.get(type(root)) or _kind(type(root))
        if kind is _Kind.ATOM or (kind is _Kind.TUPLE and immutable(root)):
            return False
        self.enter(root, type(root).__name__)
        return True

    def enter(self, value: Any, where: Any) -> None:
        """Record how to restore ``value`` (reached at ``where``) before the call changes it."""
        key = id(value)
        if key in self.seen:
            return
        cls = type(value)
        kind = _KINDS.get(cls)
        if kind is None:
            kind = _kind(cls)
        if kind is _Kind.ATOM or (kind is _Kind.TUPLE and immutable(value)):
            return
        self.seen.add(key)
        if kind is _Kind.CONTAINER:
            self._enter_container(value, where)
            return
        if kind is _Kind.UNTRACKABLE:
            raise ForkError(
                f"an undo log cannot track {_describe(where)} (a {cls.__name__} without a "
                "__dict__ to record); fork this state with tg.DeepCopyFork() or a "
                "tg.CallbackFork"
            )
        if key in _ENTERED:
            raise ForkError(
                f"{_describe(where)} is already in another dry run: one at a time per state"
            )
        if kind is _Kind.RANDOM:
            self.randoms.append((value, value.getstate()))
        info = _class_info(cls)
        standin = info.standin
        if standin is None:
            self._enter_eagerly(value, cls)
            return
        dict_slot = info.dict_slot
        real = dict_slot.__get__(value)
        if _ATOM_TYPES.issuperset(map(type, real.values())):
            # Only plain values: a copy of the dict is its whole pre-image, and far cheaper
            # than a stand-in (the files of a directory, say, reached all at once).
            self.eager.append((value, real, real.copy(), ()))
            return
        entry = _Entry(self, real, {})
        value.__class__ = standin
        dict_slot.__set__(value, entry.fresh)
        _ENTERED[key] = entry
        self.lazy.append((value, info, cls, entry))
        if info.shadowable and not info.shadowable.isdisjoint(real):
            for name in info.shadowable.intersection(real):
                entry.fetch(value, name)

    def _enter_eagerly(self, obj: Any, cls: type) -> None:
        real = object.__getattribute__(obj, "__dict__")
        slots = []
        for name in _slot_names(cls):
            try:
                slots.append((name, object.__getattribute__(obj, name)))
            except AttributeError:
                continue
        self.eager.append((obj, real, dict(real), slots))
        for name, value in [*real.items(), *slots]:
            self.enter(value, (obj, name))

    def _enter_container(self, container: Any, where: Any) -> None:
        if type(container) in _MARSHALLABLE and _PLAIN_OBJECTS.isdisjoint(
            map(type, container.values() if isinstance(container, dict) else container)
        ):
            try:  # plain data all the way down: one pass in C instead of a walk in Python
                self.containers.append((container, Frozen(marshal.dumps(container))))
                return
            except ValueError:  # it holds something else (an object, an enum): walked
                pass
        if isinstance(container, dict):
            self.containers.append((container, dict(container)))
            items: Any = container.values()
        else:
            self.containers.append((container, list(container)))
            items = container
        atoms = _ATOM_TYPES
        if atoms.issuperset(map(type, items)):
            return  # a leaf of plain values: the copy is all it takes
        members = [item for item in items if type(item) not in atoms]
        if len(members) > _FEW and _PLAIN_OBJECTS.issuperset(map(type, members)):
            members = self._record_plain_objects(members)
        for item in members:
            self.enter(item, where)

    def _record_plain_objects(self, members: list[Any]) -> list[Any]:
        """Record the members whose dicts hold only plain values (the files of a directory,
        say, all reached at once) by a copy of each dict, checked and taken in C rather than
        entered one by one; the members left to enter."""
        atoms = _ATOM_TYPES
        dicts = list(map(_GET_DICT, members))
        rest: list[Any] = []
        if not atoms.issuperset(map(type, itertools.chain.from_iterable(map(dict.values, dicts)))):
            plain = [atoms.issuperset(map(type, d.values())) for d in dicts]
            rest = list(itertools.compress(members, map(operator.not_, plain)))
            members = list(itertools.compress(members, plain))
            dicts = list(itertools.compress(dicts, plain))
        # One met before (through another container) is recorded again: the records are
        # restored last to first, so the earliest, from before the call changed it, wins.
        self.seen.update(map(id, members))
        self.eager.extend(zip(members, dicts, map(dict.copy, dicts), itertools.repeat(())))
        return rest

    def keep(self) -> None:
        """The call stands: what it wrote goes into the real dicts, the classes go back."""
        self._close(rollback=False)

    def rollback(self) -> None:
        """The call is undone: everything recorded is restored in place."""
        self._close(rollback=True)

    def _close(self, rollback: bool) -> None:
        if self.closed:
            return
        self.closed = True
        for obj, info, cls, entry in reversed(self.lazy):
            del _ENTERED[id(obj)]
            real = entry.real
            info.dict_slot.__set__(obj, real)
            obj.__class__ = cls
            if not rollback:
                real.update(entry.fresh)
                if entry.deleted:
                    for name in entry.deleted - entry.fresh.keys():
                        del real[name]
        if not rollback:
            return
        for obj, real, copy, slots in reversed(self.eager):
            real.clear()
            real.update(copy)
            for name, value in slots:
                object.__setattr__(obj, name, value)
        for container, copy in reversed(self.containers):
            restore(container, copy)
        for generator, state in self.randoms:
            generator.setstate(state)


def _describe(where: Any) -> str:
    """Where a value was reached: ``(object, attribute)`` or the root's name."""
    if isinstance(where, tuple):
        obj, name = where
        return f"{type(obj).__name__}.{name}"
    return str(where)
