"""Arguments validation left as they were go to the tool as the caller's own objects.

pydantic validates a ``list``, ``dict`` or ``set`` argument into a new one even when nothing
in it changes, so a tool that fills or edits a container it was passed (``add_to_cart(cart:
list, item: str)``) changed the guard's copy, and the caller's object, unguarded the one the
tool changes, stayed as it was. Where the validated value is the original over again (the
same types all the way down, equal scalars), the tool gets the original; where validation
converted something (an int into a float, a dict into a model), it gets the conversion, as
before. Containers larger than :data:`MAX_NODES` are not compared (their conversion stands):
the comparison runs in Python, validation in Rust.
"""

from __future__ import annotations

import collections.abc as abc
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

_MISSING = object()
MAX_NODES = 1_000  # about 0.1 ms of comparing, at most

_CONTAINERS: frozenset[Any] = frozenset(
    {list, dict, set, abc.Sequence, abc.MutableSequence, abc.Mapping, abc.MutableMapping}
    | {abc.Set, abc.MutableSet}
)
_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})


def container_arguments(model: type[BaseModel], renamed: Mapping[str, str]) -> tuple[str, ...]:
    """The arguments whose annotation takes a container validation rebuilds."""
    return tuple(
        renamed.get(name, name)
        for name, field in model.model_fields.items()
        if _takes_container(field.annotation)
    )


def _takes_container(annotation: Any) -> bool:
    if annotation in _CONTAINERS:
        return True
    origin = typing.get_origin(annotation)
    if origin in _CONTAINERS:
        return True
    if origin is typing.Annotated:
        return _takes_container(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return any(_takes_container(a) for a in typing.get_args(annotation))
    return False


def keeping_originals(
    validate: Callable[[dict[str, Any]], dict[str, Any]], names: tuple[str, ...]
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``validate``, handing back the original of each of ``names`` it left unchanged."""

    def validate_keeping(args: dict[str, Any]) -> dict[str, Any]:
        values = validate(args)
        for name in names:
            original = args.get(name, _MISSING)  # not passed: its default stays as it is
            if original is _MISSING:
                continue
            new = values.get(name, original)
            if new is not original and unchanged(new, original):
                values[name] = original
        return values

    return validate_keeping


def unchanged(new: Any, old: Any) -> bool:
    """Whether ``new`` is ``old`` over again: the same types all the way down, the same
    keys in the same order, equal scalars (at most :data:`MAX_NODES` compared)."""
    budget = MAX_NODES
    stack = [(new, old)]
    while stack:
        a, b = stack.pop()
        budget -= 1
        if budget < 0:
            return False
        if a is b:
            continue
        cls = a.__class__
        if cls is not b.__class__:
            return False
        if cls is list or cls is tuple:
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b, strict=True))
        elif cls is dict:
            if len(a) != len(b):
                return False
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
                if ka is not kb and (ka.__class__ is not kb.__class__ or ka != kb):
                    return False
                stack.append((va, vb))
        elif cls is set or cls is frozenset:
            kinds = {x.__class__ for x in a}
            if len(a) != len(b) or not kinds <= _SCALARS or a != b:
                return False
            if kinds != {x.__class__ for x in b}:
                return False
            budget -= len(a)
        elif cls in _SCALARS:
            if a != b:
                return False
        else:  # an object validation built (a model, a date from text): its conversion stands
            return False
    return True
