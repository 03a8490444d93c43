"""A span attribute's value (an OTLP ``AnyValue`` parsed from JSON) checked against the
contract's types and bounds before the report keeps it (docs/report-limits.md): a value that
breaks them raises :class:`Malformed`, which the reader turns into a ``file:line`` error."""

from __future__ import annotations

import re
from typing import Any

from .. import _contract as A
from .escape import short, short_id

_INT_DIGITS = 400  # a longer decimal string is not even parsed (int() costs grow with length)
# A decimal string: an optional sign and ASCII digits, nothing else (int() would also take
# " 3", "3_000" and other scripts' digits, which the SQL report could not read alike).
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_BOOL_STRINGS = {"true": True, "false": False}  # 1.1: booleans stored as strings

AnyValue = dict[str, Any]
"""An OTLP ``AnyValue`` as parsed from JSON (``{"stringValue": ...}``, ``{"intValue": ...}``,
...): its members are unchecked until one of the readers below converts them."""


class Malformed(Exception):
    """A span that claims to be ours but breaks the contract's types."""


def text(value: AnyValue | None, cut: int) -> str | None:
    """A string attribute for display, cut to ``cut`` characters; anything else is None (a
    description, not a figure: a wrong type here is no input error)."""
    if value is None:
        return None
    raw = value.get("stringValue") if value.__class__ is dict else None
    if raw.__class__ is not str:
        return None
    text = str(raw)
    return text if len(text) <= cut else text[: cut - 3] + "..."


def int_value(value: AnyValue, key: str) -> int:
    """An int attribute: ``intValue`` as a number or a decimal string (the OTLP JSON mapping),
    or (1.1) a decimal ``stringValue``. Booleans, fractions and anything else are errors."""
    raw = value.get("intValue")
    if raw is None:
        raw = value.get("stringValue")
    if raw.__class__ is int:
        return int(raw)
    if raw.__class__ is str:
        if len(raw) <= _INT_DIGITS and _DECIMAL.fullmatch(raw):
            return int(raw)
    elif raw.__class__ is float and raw.is_integer():
        return int(raw)  # 3.0 from a writer that only has floats; range-checked by the caller
    raise Malformed(f"{key} is not an integer: {short(value)}")


def bool_value(value: AnyValue, key: str) -> bool:
    """A bool attribute: ``boolValue``, or (1.1) the ``stringValue`` "true" or "false"."""
    raw = value.get("boolValue")
    if raw is True or raw is False:
        return raw
    if raw is None:
        text = value.get("stringValue")
        if text.__class__ is str and text in _BOOL_STRINGS:
            return _BOOL_STRINGS[text]
    raise Malformed(f"{key} is not a boolean: {short(value)}")


def str_value(value: AnyValue, key: str) -> str:
    """A string attribute: ``stringValue`` holding a string, nothing else (an id that is an
    int here and a string there would not even sort)."""
    raw = value.get("stringValue")
    if raw.__class__ is not str:
        raise Malformed(f"{short_id(key)} is not a string: {short(value)}")
    return str(raw)


def trajectory_id(value: AnyValue) -> str:
    tid = str_value(value, A.TRAJECTORY_ID)
    if not tid:
        raise Malformed(f"{A.TRAJECTORY_ID} is empty")
    return tid


def too_long(key: str, n: int, max_length: int, tid: str) -> str:
    return (
        f"{key} {n} exceeds the maximum trajectory length {max_length:,} "
        f"(trajectory {short_id(tid)!r}; raise the limit with --max-length)"
    )


def step_value(value: AnyValue, tid: str, max_length: int) -> int:
    step = int_value(value, A.STEP)
    if step < 1:
        raise Malformed(f"{A.STEP} must be >= 1, got {step} (trajectory {short_id(tid)!r})")
    if step > max_length:
        raise Malformed(too_long(A.STEP, step, max_length, tid))
    return step
