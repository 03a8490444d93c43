"""The declaration store every backend's rules are added to (see the package docstring)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import toolguard as tg

Pred = Callable[..., bool]


@dataclass
class Rules:
    preconditions: list[tg.Precondition] = field(default_factory=list)
    requires: dict[str, str] = field(default_factory=dict)
    produces: dict[str, str | Callable[[Any], Iterable[Any]]] = field(default_factory=dict)
    invalidates: dict[str, str] = field(default_factory=dict)
    grounded: list[str] = field(default_factory=list)


RULES: dict[str, dict[str, Rules]] = {}


def tolerant(pred: Pred) -> Pred:
    """An ill-typed argument makes the predicate false instead of a guard error.

    Log mode runs every check even after the schema check failed, so predicates see values of
    the wrong type; the primary cause stays ``schema`` either way. On well-typed calls (the
    whole ground truth) this wrapper never fires, so it cannot hide a predicate bug there:
    such a bug would show up as a flagged ground-truth call.
    """

    @functools.wraps(pred)
    def wrapper(*args: Any, **kwargs: Any) -> bool:
        try:
            return bool(pred(*args, **kwargs))
        except (TypeError, AttributeError):
            return False

    return wrapper


def add(cls: str, tool: str, *pre: tuple[str, Pred, str], **decl: Any) -> None:
    rules = RULES.setdefault(cls, {}).setdefault(tool, Rules())
    rules.preconditions.extend(tg.Precondition(i, tolerant(p), m) for i, p, m in pre)
    for key, value in decl.items():
        current = getattr(rules, key)
        if isinstance(current, list):
            current.extend(value)
        else:
            current.update(value)
