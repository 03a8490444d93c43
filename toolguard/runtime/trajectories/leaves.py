"""The scalar leaves of a value as text: what observing a tool's output adds to what the
trajectory has seen (the information check)."""

from __future__ import annotations

import datetime
import decimal
import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..tools.places import model_values

_SKIPPED = frozenset({type(None), bytes})


def add_leaves(value: Any, add: Callable[[str], Any], depth: int = 0) -> None:
    """``for leaf in _leaves(value): add(leaf)``, without a generator per container: exact
    built-in types take a direct branch, anything else the same tests as ``_leaves``."""
    if depth > 20:
        return
    kind = type(value)
    if kind is str:
        add(value)
    elif kind is dict or kind is list or kind is tuple:
        depth += 1
        if depth > 20:
            return
        for v in value.values() if kind is dict else value:
            k = type(v)
            if k is str:
                add(v)
            elif k is int or k is float or k is bool:
                add(str(v))
            elif k not in _SKIPPED:
                add_leaves(v, add, depth)
    elif kind in _SKIPPED:
        return
    else:
        for leaf in _leaves(value, depth):
            add(leaf)


def _leaves(value: Any, depth: int = 0) -> Iterable[str]:
    """Scalar leaves of a tool output as text; containers and models are walked."""
    if depth > 20:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool | int | float):
        yield str(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _leaves(v, depth + 1)
    elif isinstance(value, enum.Enum):  # as a result's JSON shows it: its value
        yield from _leaves(value.value, depth + 1)
    elif isinstance(value, datetime.date | datetime.time):
        # JSON writes the ISO form; str() the one with a space (the model may copy either)
        yield value.isoformat()
        if str(value) != value.isoformat():
            yield str(value)
    elif isinstance(value, uuid.UUID | decimal.Decimal):
        yield str(value)
    elif hasattr(value, "__pydantic_fields__"):
        for v in model_values(value).values():
            yield from _leaves(v, depth + 1)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            yield from _leaves(getattr(value, name, None), depth + 1)
    elif isinstance(getattr(type(value), "__attrs_attrs__", None), tuple):
        # An attrs class (its instances may have slots, no __dict__): by its fields' names.
        for attribute in type(value).__attrs_attrs__:
            yield from _leaves(getattr(value, attribute.name, None), depth + 1)
