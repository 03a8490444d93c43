"""An undo log over plain Python objects: the in-place fork of :class:`UndoLogFork`.

A copying fork costs what the whole state weighs; a call costs what it touches. The undo log
lets the call run on the real objects and records, lazily, how to restore only what the call
reaches, so that keeping the call's effects costs next to nothing and rolling them back gives
back the very same object graph: the same objects at the same places, with their types,
values, dict order, sharing and cycles.

- an object with a ``__dict__`` is *entered*: for the transaction it gets a fresh, empty
  ``__dict__`` and a stand-in class (a subclass with the same layout) whose ``__getattr__``,
  called only for a missing attribute, fetches the value from the real dict the first time
  the call reads it (entering it when it is mutable). Writes land in the fresh dict. Keeping
  merges the fresh dict into the real one; rolling back drops it. Reading an attribute a
  second time costs nothing extra;
- an object whose dict holds only plain values (str, numbers, dates: a file of a file
  system, say) is recorded by a copy of its dict instead: cheaper than a stand-in, and the
  many such objects of one container are checked and copied in one pass in C;
- an object whose class cannot wear a stand-in without running the class's own code (slots,
  its own metaclass as pydantic models have, an ``__init_subclass__``) is recorded eagerly:
  a copy of its dict and of its slots, its values entered;
- a builtin container reached (dict, list, set, bytearray, deque and their subclasses) is
  recorded by a shallow copy, and so is every container inside it; tuples, frozensets and
  namedtuples cannot change, but what they hold is entered;
- a ``random.Random`` keeps its state.

Rolling back puts every recorded shallow copy back into its own container, in place: since
each copy holds the original members, the graph comes back exactly, whatever the call
swapped, replaced or rebuilt. Nothing of the journal's own bookkeeping goes through the
state's own hooks (``__setattr__``, ``__iter__``, ``__setitem__``, ``getstate``): it uses
the builtin types' methods and descriptors directly. A journal that fails on the way (an
object it cannot record) undoes what it already recorded and stays failed: every later fetch
raises, and the dry run is a guard error.

While a call runs, ``type(obj)`` of an entered object is the stand-in (``isinstance`` and the
class's name are unchanged); ``vars(obj)`` and ``obj.__dict__`` are complete. One
transaction at a time per object.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import gc
import itertools
import operator
import random
from collections.abc import Callable, Iterable
from typing import Any, Final

from ..._errors import ForkError
from .undolog_classes import (
    ATOM_TYPES,
    CLASS_SLOT,
    DICT_SLOTS,
    ENTERED,
    KINDS,
    PLAIN_OBJECTS,
    ClassInfo,
    Kind,
    class_info,
    immutable,
    kind_of,
)
from .undolog_restore import DICT_OPS, LIST_OPS, Container, container_ops

_GET_STATE: Final = random.Random.getstate
_SET_STATE: Final = random.Random.setstate
_ABSENT: Final = object()
_EXACT_CONTAINERS: Final = frozenset(
    {dict, list, set, bytearray, collections.deque, collections.OrderedDict}
)
_GET_DICT: Final = operator.attrgetter("__dict__")
_IS_DICT: Final = functools.partial(operator.is_, dict)
_IS_LIST: Final = functools.partial(operator.is_, list)
_BULK: Final = frozenset({dict, list})  # recorded a level at a time
_ONLY_DICTS: Final = frozenset({dict})
_FEW: Final = 4  # up to this many objects in a container, entering them one by one is faster


class _Entry:
    """One object entered lazily: its real dict, the fresh one, what it deleted."""

    __slots__ = ("deleted", "fresh", "journal", "real")

    def __init__(self, journal: Journal, real: dict[str, Any], fresh: dict[str, Any]) -> None:
        self.journal = journal
        self.real = real
        self.fresh = fresh
        self.deleted: set[str] = set()

    def logical(self) -> dict[str, Any]:
        """The object's dict as a plain run would have it now, in its order: the real
        attributes not deleted (at their places), then the new ones, as last written."""
        fresh, deleted = self.fresh, self.deleted
        out = {
            name: fresh.get(name, value) for name, value in self.real.items() if name not in deleted
        }
        out.update((name, value) for name, value in fresh.items() if name not in out)
        return out

    def fetch(self, obj: Any, name: str) -> Any:
        """The real value of ``name`` (entered), now in the fresh dict; KeyError if none."""
        journal = self.journal
        if journal.failure is not None:
            raise ForkError(f"the undo log failed earlier in this call: {journal.failure}")
        if name in self.deleted:
            raise KeyError(name)
        value = self.real[name]
        if type(value) not in ATOM_TYPES:
            journal.enter(value, (obj, name))  # which passes over what cannot change
        self.fresh[name] = value
        return value


class Journal:
    """What one transaction entered and how to undo it."""

    __slots__ = ("closed", "containers", "eager", "failure", "lazy", "randoms", "seen")

    def __init__(self) -> None:
        self.lazy: list[tuple[Any, ClassInfo, type, _Entry]] = []
        # (object, its dict's descriptor, the dict, a copy of it, its slots' values)
        self.eager: list[tuple[Any, Any, dict[str, Any] | None, dict[str, Any], list[Any]]] = []
        self.containers: list[tuple[Any, Container, Any]] = []
        self.randoms: list[tuple[Any, Any]] = []
        self.seen: set[int] = set()
        self.closed = False
        self.failure: Exception | None = None

    def track(self, root: Any) -> bool:
        """Start the transaction at ``root``; False when it holds nothing that can change.
        Whatever fails, every object is left as it was."""
        if immutable(root):
            return False
        try:
            self._enter_all([root], type(root).__name__)
        except BaseException:
            self.rollback()
            raise
        return True

    def enter(self, value: Any, where: Any) -> None:
        """Record how to restore ``value`` (reached at ``where``) before the call changes it.
        A failure marks the journal failed: the dry run is then a guard error."""
        try:
            self._enter_all([value], where)
        except Exception as exc:
            if self.failure is None:
                self.failure = exc
            if isinstance(exc, ForkError):
                raise
            raise ForkError(f"the undo log could not record {_describe(where)}: {exc!r}") from exc

    def _enter_all(self, values: Iterable[Any], where: Any) -> None:
        """Record ``values`` and everything they hold, a level at a time, without
        recursion. The plain dicts and lists of a level (the rows of a table, say) are
        copied and searched in bulk, in C; anything else is recorded one by one."""
        seen = self.seen
        frontier = _mutable(values)
        while frontier:
            ids = list(map(id, frontier))
            new = set(ids)
            if len(new) < len(ids) or not seen.isdisjoint(new):  # met before: each once
                level = dict(zip(ids, frontier, strict=True))
                new = level.keys() - seen
                frontier = list(map(level.__getitem__, new))
            seen |= new
            frontier = self._record_level(frontier, where)

    def _record_level(self, items: list[Any], where: Any) -> list[Any]:
        """Record one level's values (each new); what they hold, to record next."""
        types = list(map(type, items))
        kinds = set(types)
        if kinds.isdisjoint(_BULK):
            return self._record_each(items, where)
        if kinds == _ONLY_DICTS:
            return self._record_bulk(items, dict.copy, DICT_OPS)
        held: list[Any] = []
        dicts = list(itertools.compress(items, map(_IS_DICT, types)))
        if dicts:
            held += self._record_bulk(dicts, dict.copy, DICT_OPS)
        lists = list(itertools.compress(items, map(_IS_LIST, types)))
        if lists:
            held += self._record_bulk(lists, list.copy, LIST_OPS)
        if len(dicts) + len(lists) < len(items):
            rest = [x for x, t in zip(items, types, strict=True) if t not in _BULK]
            held += self._record_each(rest, where)
        return held

    def _record_bulk(
        self, items: list[Any], copy: Callable[[Any], Any], ops: Container
    ) -> list[Any]:
        """Plain dicts or lists: copied, and their members found, in C."""
        copies = list(map(copy, items))
        self.containers.extend(zip(items, itertools.repeat(ops), copies))
        atoms = ATOM_TYPES
        return [v for v in gc.get_referents(*copies) if type(v) not in atoms]  # keys too

    def _record_each(self, items: list[Any], where: Any) -> list[Any]:
        """Record what is not a plain dict or list; what they hold, to record next."""
        held: list[Any] = []
        plain = [x for x in items if type(x) in PLAIN_OBJECTS]
        if len(plain) > _FEW:  # recorded in bulk; those whose dicts hold more, one by one
            others = [x for x in items if type(x) not in PLAIN_OBJECTS]
            items = others + self._record_plain_objects(plain)
        for value in items:
            cls = type(value)
            kind = KINDS.get(cls) or kind_of(cls)
            if kind is Kind.CONTAINER:
                self._record_container(value, cls, held)
            elif kind is Kind.TUPLE:
                held += value
                if getattr(cls, "__dictoffset__", 0):
                    self._record_eagerly(value, class_info(cls), held)
            elif kind is Kind.OBJECT:
                self._enter_object(value, cls, where, held)
            elif kind is not Kind.ATOM:
                raise ForkError(
                    f"an undo log cannot record a {cls.__name__!r} (no __dict__ or slots), "
                    f"reached at {_describe(where)}; fork this state with "
                    "tg.DeepCopyFork() or a tg.CallbackFork"
                )
        return _mutable(held)

    def _enter_object(self, value: Any, cls: type, where: Any, held: list[Any]) -> None:
        key = id(value)
        if key in ENTERED:
            raise ForkError(
                f"{_describe(where)} is already in another dry run: one at a time per state"
            )
        if isinstance(value, random.Random):
            self.randoms.append((value, _GET_STATE(value)))
        info = class_info(cls)
        standin = info.standin
        if standin is None:
            self._record_eagerly(value, info, held)
            return
        dict_slot = info.dict_slot
        real = dict_slot.__get__(value)
        if ATOM_TYPES.issuperset(map(type, real.values())):
            # Only plain values: a copy of the dict is its whole pre-image, and far cheaper
            # than a stand-in (the files of a directory, say, reached all at once).
            self.eager.append((value, dict_slot, real, real.copy(), []))
            return
        entry = _Entry(self, real, {})
        CLASS_SLOT.__set__(value, standin)
        dict_slot.__set__(value, entry.fresh)
        ENTERED[key] = entry
        self.lazy.append((value, info, cls, entry))
        if info.shadowable and not info.shadowable.isdisjoint(real):
            for name in info.shadowable.intersection(real):
                entry.fresh[name] = real[name]
                held.append(real[name])

    def _record_eagerly(self, obj: Any, info: ClassInfo, held: list[Any]) -> None:
        real = info.dict_slot.__get__(obj) if info.dict_slot is not None else None
        slots = []
        for descriptor in info.slots:
            try:
                slots.append((descriptor, descriptor.__get__(obj, None)))
            except AttributeError:  # unset: unset again on a rollback
                slots.append((descriptor, _ABSENT))
        copy = dict(real) if real is not None else {}
        self.eager.append((obj, info.dict_slot, real, copy, slots))
        held += [value for _, value in slots if value is not _ABSENT]
        if real is not None:
            held += real.values()

    def _record_container(self, container: Any, cls: type, held: list[Any]) -> None:
        ops = container_ops(cls)
        assert ops is not None
        copy = ops.copy(container)
        self.containers.append((container, ops, copy))
        if cls not in _EXACT_CONTAINERS:  # a subclass may carry attributes of its own
            info = class_info(cls)
            if info.dict_slot is not None or info.slots:
                self._record_eagerly(container, info, held)
        held += ops.members(copy)

    def _record_plain_objects(self, members: list[Any]) -> list[Any]:
        """Record the members whose dicts hold only plain values (the files of a directory,
        say, all reached at once) by a copy of each dict, checked and taken in C rather than
        entered one by one; the members left to enter."""
        atoms = ATOM_TYPES
        dicts = list(map(_GET_DICT, members))
        rest: list[Any] = []
        if not atoms.issuperset(map(type, itertools.chain.from_iterable(map(dict.values, dicts)))):
            plain = [atoms.issuperset(map(type, d.values())) for d in dicts]
            rest = list(itertools.compress(members, map(operator.not_, plain)))
            members = list(itertools.compress(members, plain))
            dicts = list(itertools.compress(dicts, plain))
        slot = DICT_SLOTS.__getitem__
        self.eager.extend(
            zip(
                members,
                map(slot, map(type, members)),
                dicts,
                map(dict.copy, dicts),
                itertools.repeat([]),
            )
        )
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
            del ENTERED[id(obj)]
            real = entry.real
            changed = type(obj) is not info.standin  # the call gave it a class of its own
            info.dict_slot.__set__(obj, real)
            if rollback or not changed:
                CLASS_SLOT.__set__(obj, cls)
            if not rollback:
                if entry.deleted:  # a deleted name written again moves to the end
                    logical = entry.logical()
                    real.clear()
                    real.update(logical)
                else:
                    real.update(entry.fresh)
        if not rollback:
            return
        for obj, dict_slot, real, copy, slots in reversed(self.eager):
            if real is not None:
                dict_slot.__set__(obj, real)  # the call may have replaced the whole dict
                real.clear()
                real.update(copy)
            for descriptor, value in slots:
                if value is _ABSENT:
                    with contextlib.suppress(AttributeError):  # the call left it unset
                        descriptor.__delete__(obj)
                else:
                    descriptor.__set__(obj, value)
        for container, ops, copy in self.containers:
            ops.restore(container, copy)
        for generator, state in self.randoms:
            _SET_STATE(generator, state)


def _mutable(values: Iterable[Any]) -> list[Any]:
    """The values that may change."""
    atoms = ATOM_TYPES
    return [value for value in values if type(value) not in atoms]


def _describe(where: Any) -> str:
    """Where a value was reached: ``(object, attribute)`` or the root's name."""
    if isinstance(where, tuple):
        obj, name = where
        return f"{type(obj).__name__}.{name}"
    return str(where)
