"""The declaration store every backend's rules are added to (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import toolguard as tg

Pred = Callable[..., bool]


@dataclass
class Rules:
    preconditions: list[tg.Precondition] = field(default_factory=list)
    refs: dict[str, str] = field(default_factory=dict)
    produces: dict[str | Callable[[Any], Iterable[Any]], str] = field(default_factory=dict)
    invalidates: dict[str, str] = field(default_factory=dict)
    grounded: list[str] = field(default_factory=list)


RULES: dict[str, dict[str, Rules]] = {}


def add(cls: str, tool: str, *pre: tuple[str, Pred, str], **decl: Any) -> None:
    rules = RULES.setdefault(cls, {}).setdefault(tool, Rules())
    rules.preconditions.extend(tg.Precondition(i, p, m) for i, p, m in pre)
    for key, value in decl.items():
        current = getattr(rules, key)
        if isinstance(current, list):
            current.extend(value)
        else:
            current.update(value)
