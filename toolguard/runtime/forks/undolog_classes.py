"""What the undo log (undolog.py) knows of a value's type, worked out once per type: whether
it can change (atoms, tuples, containers, objects), and for an object's class how it is
recorded: lazily under a stand-in class, or eagerly by a copy of its dict and slots.

A stand-in is a subclass with the same layout whose ``__getattr__`` fetches an attribute from
the real dict the first time the call reads it (:data:`ENTERED` maps an entered object to its
record). A class gets one only when making it runs none of the class's own code: a plain
metaclass, no ``__init_subclass__`` of its own, no slots, no ``__dict__`` of its own making.
"""

from __future__ import annotations

import abc
import collections
import datetime
import decimal
import enum
import fractions
import pathlib
import re
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any, Final, Protocol

from ..._errors import ForkError
from .undolog_restore import container_ops


class Record(Protocol):
    """An entered object's record, as a stand-in consults it (undolog._Entry)."""

    real: dict[str, Any]
    fresh: dict[str, Any]
    deleted: set[str]

    def fetch(self, obj: Any, name: str) -> Any: ...

    def logical(self) -> dict[str, Any]: ...


# Values that cannot change in place: never entered, never copied.
ATOMS: Final = (
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
ATOM_TYPES: Final = frozenset(
    {type(None), bool, int, float, complex, str, bytes, datetime.datetime, datetime.date}
)
_PLAIN_METACLASSES: Final = (type, abc.ABCMeta)
# The class slot of every object, used directly: an assignment through the object would run
# its class's own __setattr__.
CLASS_SLOT: Final = object.__dict__["__class__"]


class Kind(enum.Enum):
    ATOM = 1
    TUPLE = 2  # cannot change, what it holds may
    CONTAINER = 3
    OBJECT = 4
    UNTRACKABLE = 5


KINDS: dict[type, Kind] = {t: Kind.ATOM for t in ATOM_TYPES}


def kind_of(cls: type) -> Kind:
    if issubclass(cls, tuple | frozenset):
        kind = Kind.TUPLE
    elif issubclass(cls, ATOMS):
        kind = Kind.ATOM
    elif container_ops(cls) is not None:
        kind = Kind.CONTAINER
    elif getattr(cls, "__dictoffset__", 0) or slot_descriptors(cls):
        kind = Kind.OBJECT
    else:
        kind = Kind.UNTRACKABLE
    KINDS[cls] = kind
    return kind


# id(object) -> its record: what a stand-in's __getattr__ consults.
ENTERED: dict[int, Record] = {}


def immutable(value: Any) -> bool:
    """Whether nothing reachable from ``value`` can change (tuples walked without recursion)."""
    todo = [value]
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind in ATOM_TYPES:
            continue
        if issubclass(kind, tuple | frozenset) and not getattr(kind, "__dictoffset__", 0):
            todo.extend(item)
        elif not isinstance(item, ATOMS):
            return False
    return True


class ClassInfo:
    """What entering an instance of a class needs, worked out once per class."""

    __slots__ = ("dict_slot", "shadowable", "slots", "standin")

    def __init__(self, cls: type) -> None:
        self.standin: type | None = None
        self.slots = slot_descriptors(cls) + c_members(cls)
        # The instance dict's own descriptor, not a __dict__ property a class may define.
        self.dict_slot: Any = next(
            (
                k.__dict__["__dict__"]
                for k in cls.__mro__
                if type(k.__dict__.get("__dict__")) is types.GetSetDescriptorType
            ),
            None,
        )
        if self.dict_slot is None and cls.__dictoffset__:
            # An instance dict with no getset descriptor: a C type's read-only member
            # (types.SimpleNamespace), recorded and restored in place; any other way in is
            # unknown, and a dry run that cannot undo what it reaches must not run.
            member = _first("__dict__", cls)
            if type(member) is not types.MemberDescriptorType:
                raise ForkError(
                    f"an undo-log dry run cannot record instances of {cls.__qualname__}: "
                    "their attributes are held where it cannot reach them"
                )
            self.dict_slot = _FixedDict(member)
        if (
            self.dict_slot is None
            or isinstance(self.dict_slot, _FixedDict)  # cannot be swapped for a stand-in's
            or self.slots
            or type(cls) not in _PLAIN_METACLASSES
            or _runs_code_on_subclassing(cls)
            or _first("__dict__", cls) is not self.dict_slot  # a __dict__ of its own making
        ):
            return  # recorded eagerly
        # Class attributes an instance value may hide: with the instance's dict empty, the
        # class's would show through, so such values are fetched as the object is entered.
        self.shadowable = frozenset(
            name for k in cls.__mro__ for name in k.__dict__ if not name.startswith("__")
        )
        self.standin = _standin(cls, self.dict_slot)


_CLASSES: dict[type, ClassInfo] = {}
# Classes whose instances can be recorded by a copy of their dict, read with a plain
# attribute lookup: a stand-in fits them and nothing runs on ``obj.__dict__``.
PLAIN_OBJECTS: set[type] = set()
DICT_SLOTS: dict[type, Any] = {}  # their dicts' descriptors


def class_info(cls: type) -> ClassInfo:
    info = _CLASSES.get(cls)
    if info is None:
        info = _CLASSES[cls] = ClassInfo(cls)
        if (
            info.standin is not None
            and KINDS.get(cls) is Kind.OBJECT
            and cls.__getattribute__ is object.__getattribute__  # type: ignore[comparison-overlap]
        ):
            PLAIN_OBJECTS.add(cls)
            DICT_SLOTS[cls] = info.dict_slot
    return info


def slot_descriptors(cls: type) -> tuple[Any, ...]:
    """The descriptors of every slot of ``cls`` (mangled names included)."""
    return tuple(
        value
        for k in cls.__mro__
        if "__slots__" in k.__dict__
        for value in k.__dict__.values()
        if type(value) is types.MemberDescriptorType
    )


# C types whose instances hold state in members outside any __dict__ or __slots__, which a
# rollback must put back: what a defaultdict makes of a missing key.
_C_MEMBERS: Final = ((collections.defaultdict, ("default_factory",)),)


def c_members(cls: type) -> tuple[Any, ...]:
    """The descriptors of the C-level members of ``cls``'s builtin bases that hold state."""
    return tuple(
        base.__dict__[name] for base, names in _C_MEMBERS if issubclass(cls, base) for name in names
    )


class _FixedDict:
    """The descriptor of an instance dict that cannot be replaced (a read-only member): read
    as the member, and "set" back to the same dict, the one rollback restores in place."""

    __slots__ = ("member",)

    def __init__(self, member: Any) -> None:
        self.member = member

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self.member.__get__(obj, owner)

    def __set__(self, obj: Any, value: Any) -> None:
        if self.member.__get__(obj) is not value:  # read-only: nobody could have replaced it
            raise ForkError("an instance dict that cannot be replaced was replaced")


def _first(name: str, cls: type) -> Any:
    """What a lookup of ``name`` on ``cls`` finds first, read without running anything."""
    return next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)


# Classes whose __init_subclass__ only looks at the new class.
_HARMLESS_SUBCLASS_HOOKS: Final = (object, typing.Generic)


def _runs_code_on_subclassing(cls: type) -> bool:
    """Whether making a subclass (the stand-in) would run the class's own code."""
    return any(
        "__init_subclass__" in k.__dict__ for k in cls.__mro__ if k not in _HARMLESS_SUBCLASS_HOOKS
    )


def _standin(cls: type, dict_slot: Any) -> type:
    fallback = getattr(cls, "__getattr__", None)
    delete: Callable[[Any, str], None] = cls.__delattr__  # type: ignore[assignment]

    def __getattr__(self: Any, name: str) -> Any:
        entry = ENTERED.get(id(self))
        if entry is not None:
            try:
                return entry.fetch(self, name)
            except KeyError:
                pass
        if fallback is not None:
            return fallback(self, name)
        raise AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")

    def __delattr__(self: Any, name: str) -> None:
        entry = ENTERED.get(id(self))
        if entry is None:
            delete(self, name)
            return
        real = name in entry.real and name not in entry.deleted
        if real and name not in entry.fresh:
            entry.fetch(self, name)  # so that the class's own __delattr__ finds it
        delete(self, name)
        if real and name not in entry.fresh:
            entry.deleted.add(name)

    def get_dict(self: Any) -> dict[str, Any]:
        entry = ENTERED.get(id(self))
        fresh: dict[str, Any] = dict_slot.__get__(self)
        if entry is not None:
            for name in [n for n in entry.real if n not in fresh and n not in entry.deleted]:
                entry.fetch(self, name)
            ordered = entry.logical()
            if list(ordered) != list(fresh):  # iterated as a plain run would see it
                fresh.clear()
                fresh.update(ordered)
        return fresh

    def set_dict(self: Any, value: dict[str, Any]) -> None:
        fresh: dict[str, Any] = dict_slot.__get__(self)
        entry = ENTERED.get(id(self))
        if entry is not None:  # the whole dict replaced: every real attribute is gone
            entry.deleted.update(entry.real)
        fresh.clear()
        fresh.update(value)

    namespace = {
        "__slots__": (),
        "__getattr__": __getattr__,
        "__delattr__": __delattr__,
        "__dict__": property(get_dict, set_dict),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    return type(cls.__name__, (cls,), namespace)
