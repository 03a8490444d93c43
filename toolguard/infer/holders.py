"""What each producer place held over the runs, for the place closure (``closure.py``).

Per place: the trajectories it held a value in, whether it ever held a value too common to
say where it came from, up to ``MAX_DISTINCT`` distinct uncommon values (keys only, never
the values), and, for every uncommon value it held, the set of the *other* places that held
the same value in the same trajectory. A place whose every value some place of a kind also
held, run by run, holds nothing but that kind's values. Bounded per place: the sets of other
places are interned (``Flow.shared``) and few; the distinct keys are capped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .values import CommonRule, value_key

Place = tuple[str, str]
MAX_DISTINCT = 64  # enough to compare with any sensible --min-distinct


@dataclass(slots=True)
class Holder:
    runs: int = 0
    last_run: str = ""
    common: bool = False  # held a value too common to carry information
    distinct: set[int] = field(default_factory=set)
    # For each uncommon value held: the other places holding it in that trajectory.
    others: set[frozenset[Place]] = field(default_factory=set)


def hold(
    holders: dict[Place, Holder],
    shared: dict[frozenset[Place], frozenset[Place]],
    run: str,
    produced: Mapping[Any, set[Place]],
    rule: CommonRule,
) -> None:
    """Add one trajectory: ``produced`` maps each value to every place that held it (its
    initial state's and its accepted results')."""
    for value, places in produced.items():
        common = rule.common(value)
        key = None if common else value_key(value)
        for place in places:
            holder = holders.get(place)
            if holder is None:
                holder = holders[place] = Holder()
            if holder.last_run != run:
                holder.runs += 1
                holder.last_run = run
            if key is None:
                holder.common = True
                continue
            if len(holder.distinct) < MAX_DISTINCT:
                holder.distinct.add(key)
            rest = frozenset(places - {place})
            holder.others.add(shared.setdefault(rest, rest))
