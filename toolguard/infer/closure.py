"""The place closure: a place that only ever held values of one kind is a producer of it.

The greedy cover (``propose._refs``) stops once every argument value is explained, so a place
holding the kind's values that no training call happened to need is left out: a symbol of
the initial watch list that no run removed, while the kind binds the exchange's symbols. A
replay then flags the first run that names one. After the kinds are named, every further
exact place (the initial state's or a tool result's, ``holders.py``) joins a kind when

- every uncommon value it held, in every training trajectory, was held in that same
  trajectory by one of the kind's places (value containment, run by run: a value merely
  seen in another run is no evidence),
- it never held a value too common to say where it came from (a flag, a small number),
- it held values in at least ``min_support`` trajectories and ``min_distinct`` distinct
  values (a place holding one value, or one scenario run again, could be contained by
  chance), and
- it fits exactly one kind (a place whose values two kinds share says nothing about which
  it produces) and the kind's key-name place does not already find it (``contents{}`` finds
  every folder's names: a subfolder's own place would add nothing).

Joining adds producers only: a replay binds more values, so it can flag fewer calls and
catch fewer mistakes, never more. ``propose(place_closure=False)`` is the before.
"""

from __future__ import annotations

from .flow import Flow, Place
from .holders import Holder
from .proposal import Proposal
from .values import INITIAL, is_key_place, key_place


def close_places(rules: list[Proposal], flow: Flow, *, min_support: int, min_distinct: int) -> None:
    """Join the places that fit (module docstring) to every rule of their kind, in place;
    each rule's ``joined`` names them."""
    kinds: dict[str, set[Place]] = {}
    for rule in rules:
        kinds.setdefault(rule.kind, set()).update(rule.places)
    taken = {p for places in kinds.values() for p in places}
    joins: dict[str, set[Place]] = {}
    for place, holder in sorted(flow.holders.items()):
        if (
            place in taken
            or is_key_place(place[1])
            or not _enough(holder, min_support, min_distinct)
        ):
            continue
        fits = [kind for kind in sorted(kinds) if _contained(holder, kinds[kind])]
        if len(fits) == 1 and not _found_by_key(place, kinds[fits[0]]):
            joins.setdefault(fits[0], set()).add(place)
    for rule in rules:
        joined = joins.get(rule.kind)
        if joined:
            rule.places = tuple(sorted({*rule.places, *joined}))
            rule.joined = tuple(sorted(joined))


def _enough(holder: Holder, min_support: int, min_distinct: int) -> bool:
    return not holder.common and holder.runs >= min_support and len(holder.distinct) >= min_distinct


def _contained(holder: Holder, places: set[Place]) -> bool:
    return bool(holder.others) and all(others & places for others in holder.others)


def _found_by_key(place: Place, places: set[Place]) -> bool:
    """The kind has the key-name place that finds this exact place's values too."""
    tool, where = place
    if tool == INITIAL and where.endswith(("{}", ".*")):
        last = where[:-2].rsplit(".", 1)[-1]
        key = None if "[]" in last else last + where[-2:]  # `a.b.contents{}` -> `contents{}`
    else:
        key = key_place(where)
    return key is not None and (tool, key) in places
