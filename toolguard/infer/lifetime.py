"""What became of a value after an accepted call used it: the evidence ``invalidates`` reads.

For every uncommon top-level argument value of an accepted call (``invalidates`` reads a
top-level argument, each item of a list) that was bound before it (produced by an earlier
result, or a value the user gave), the rest of the trajectory is followed: every later call
that used the value (tool, argument path, whether the environment accepted it, and which
result places had produced the value again in between, or whether the user gave it again:
either binds it anew in a replay), and the producer places whose tool answered again without
it while it never reappeared in any result ("vanished").

What is kept once the trajectory ends is the value's :class:`After`, a signature without the
run or the value (``evidence.py`` tallies them): ``invalidates`` asks only whether *some*
later use was of a kind, so the uses are a set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

Place = tuple[str, str]  # (producer tool, place in its result)


@dataclass(frozen=True, slots=True)
class Use:
    """A later call's use of the value, before the user gave it again (``Lifetimes.used``)."""

    tool: str
    path: str
    accepted: bool
    rebound: frozenset[Place]  # result places that produced the value again before this use


@dataclass(frozen=True, slots=True)
class After:
    """One accepted call's bound argument value and its later life in the trajectory."""

    producers: frozenset[Place]
    user_given: bool
    uses: frozenset[Use] = frozenset()
    vanished: frozenset[Place] = frozenset()

    @property
    def may_be_evidence(self) -> bool:
        """A later use rejected or a producer answering without it: only such a value can
        be evidence, so only its key is counted (``invalidates`` prints distinct ones)."""
        return bool(self.vanished) or any(not use.accepted for use in self.uses)


@dataclass(slots=True)
class _Open:
    value: Any
    key: int
    producers: frozenset[Place]
    user_given: bool
    uses: set[Use] = field(default_factory=set)
    first: set[tuple[str, str, bool]] = field(default_factory=set)  # (tool, path, accepted)
    rebound: set[Place] = field(default_factory=set)
    said: bool = False
    reappeared: bool = False
    lacking: set[Place] = field(default_factory=set)


class Lifetimes:
    """Follows one trajectory's values; ``close`` hands each one's :class:`After` over."""

    def __init__(self) -> None:
        self._by_value: dict[Any, list[_Open]] = {}
        self._opened: list[tuple[tuple[str, str], _Open]] = []

    def said(self, values: Iterable[Any]) -> None:
        for value in values:
            for one in self._get(value):
                one.said = True

    def used(self, tool: str, leaves: Iterable[tuple[str, Any]], accepted: bool) -> None:
        """A call's argument leaves (before its own values are opened).

        Only the first use per (tool, path, accepted) is kept, and none once the user gave
        the value again: ``invalidates`` asks whether some use was not bound anew (no
        ``said``, no ``rebound`` place of the kind), and ``rebound`` and ``said`` only grow
        along the trajectory, so a later use of the same tool, path and answer is never
        unbound where the first was bound. The same verdicts, with as many distinct use
        sets as the tools' structure has rather than one per order of events."""
        for path, value in leaves:
            for one in self._get(value):
                if one.said:
                    continue
                seen = (tool, path, accepted)
                if seen not in one.first:
                    one.first.add(seen)
                    one.uses.add(Use(tool, path, accepted, frozenset(one.rebound)))

    def answered(self, tool: str, places: list[tuple[str, Any]]) -> None:
        """An accepted call's result leaves: the values it produced again, and the open
        values a producer of theirs answered without."""
        present: set[Any] = set()
        for place, value in places:
            with contextlib.suppress(TypeError):
                present.add(value)
            for one in self._get(value):
                one.rebound.add((tool, place))
                one.reappeared = True
        for _, one in self._opened:
            if one.reappeared or one.value in present:
                continue
            one.lacking.update(p for p in one.producers if p[0] == tool)

    def open(
        self,
        tool: str,
        path: str,
        value: Any,
        key: int,
        producers: frozenset[Place],
        user_given: bool,
    ) -> None:
        try:
            hash(value)
        except TypeError:
            return
        one = _Open(value, key, producers, user_given)
        self._by_value.setdefault(value, []).append(one)
        self._opened.append(((tool, path), one))

    def close(self) -> Iterator[tuple[tuple[str, str], After, int]]:
        """Each opened value's (tool, path), :class:`After` and value key."""
        for where, one in self._opened:
            vanished = frozenset() if one.reappeared else frozenset(one.lacking)
            after = After(one.producers, one.user_given, frozenset(one.uses), vanished)
            yield where, after, one.key

    def _get(self, value: Any) -> list[_Open]:
        try:
            return self._by_value.get(value, [])
        except TypeError:
            return []
