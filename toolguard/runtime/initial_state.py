"""Places in the environment's initial state: a contract file's ``[initial]`` table.

A run may start from a state it was given (BFCL's ``initial_config``: the orders, stocks,
files and tweets that exist before the first call). An id the agent names from there was
never in a result, so ``produces`` cannot bind it; ``initial = { PLACE = "kind" }`` says that
values at ``PLACE`` of that state are usable values of ``kind`` from the start. A replay binds
them when the trajectory opens (``toolguard/replay/engine.py``), unshown: the model was not
shown the state, so they are never offered in a rejection's message nor count as seen.

Places are those of ``produces`` (a key name found anywhere, a path such as
``TradingBot.watch_list[]`` or ``$.a.b``) plus one form for records keyed by data, whose ids
are the keys of a mapping rather than a leaf: ``PATH{}`` (the keys of the mapping at the
path) and ``KEY{}`` (the keys of every mapping under a key ``KEY``, at any depth, nested ones
too: a file system's ``contents{}``); ``{}`` alone is the top mapping's keys. ``PATH.*`` and
``KEY.*`` are the scalar values of such mappings (a name -> id map: ``user_map.*``). A key that
spells an integer (``"12345"``) is also that integer: JSON, the form such a state is given
in, has text keys only, and the environments load them as numbers (BFCL's orders).

Nothing is evaluated: a place is data, walked over data.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .tools.places import _is_path, find_key_into, resolve_path
from .tools.places import _result_path as _parts

KEYS = "{}"
VALUES = ".*"
MAX_DEPTH = 20  # as the guard's own walks
_INTEGER = re.compile(r"-?[0-9]+")


def check_place(place: str) -> str | None:
    """Why ``place`` cannot be an initial-state place, or None."""
    if not place or place == "$":
        return "a place must name a path, a key name or PATH{} (the whole state binds nothing)"
    base = place[: -len(KEYS)] if place.endswith(KEYS) else place
    base = base[: -len(VALUES)] if base == place and place.endswith(VALUES) else base
    if KEYS in base:
        return "'{}' may only end a place"
    if "*" in base:
        return "'.*' may only end a place"
    if base and not _parts(base):
        return "a place must name a path, a key name or PATH{}"
    return None


def key_values(key: Any) -> Iterator[Any]:
    """A mapping's key as values: itself, and its integer where it spells one."""
    if isinstance(key, bool) or not isinstance(key, str | int | float):
        return
    yield key
    if isinstance(key, str) and _INTEGER.fullmatch(key):
        yield int(key)


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float)


def _keys(mapping: Mapping[Any, Any]) -> Iterator[Any]:
    for name in mapping:
        yield from key_values(name)


def _values(mapping: Mapping[Any, Any]) -> Iterator[Any]:
    return (v for v in mapping.values() if _scalar(v))


Members = Callable[[Mapping[Any, Any]], Iterator[Any]]


def _under(value: Any, key: str, members: Members, depth: int) -> Iterator[Any]:
    """The members of every mapping held under ``key`` at any depth (nested ones too)."""
    if depth > MAX_DEPTH:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if k == key and isinstance(v, Mapping):
                yield from members(v)
            if isinstance(v, Mapping | list | tuple):
                yield from _under(v, key, members, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _under(v, key, members, depth + 1)


def _members(base: str, members: Members) -> Callable[[Any], list[Any]]:
    if not base or _is_path(base) or base.startswith("$."):
        parts = _parts(base)

        def at_path(state: Any) -> list[Any]:
            found = [state] if not parts else resolve_path(state, parts)
            return [v for m in found if isinstance(m, Mapping) for v in members(m)]

        return at_path
    return lambda state: list(_under(state, base, members, 0))


def finder(place: str) -> Callable[[Any], list[Any]]:
    """The values ``place`` finds in a state (scalars only: nothing else is bound)."""
    if place.endswith(KEYS):
        return _members(place[: -len(KEYS)], _keys)
    if place.endswith(VALUES):
        return _members(place[: -len(VALUES)], _values)
    if _is_path(place) or place.startswith("$."):
        parts = _parts(place)
        return lambda state: [
            v
            for found in resolve_path(state, parts)
            for v in (found if isinstance(found, list | tuple) else [found])
            if _scalar(v)
        ]

    def by_key(state: Any) -> list[Any]:
        out: list[Any] = []
        find_key_into(state, place, out)
        return [v for v in out if _scalar(v)]

    return by_key


def initial_values(places: Mapping[str, str], state: Any) -> Iterator[tuple[str, Any]]:
    """(kind, value) for every value the ``[initial]`` places find in ``state``, in the
    table's order."""
    if state is None:
        return
    for place, kind in places.items():
        for value in finder(place)(state):
            yield kind, value


def candidate_places(state: Any) -> Iterable[str]:
    """Every ``PATH{}``, ``KEY{}``, ``PATH.*`` and ``KEY.*`` place of the mappings in
    ``state`` (what inference offers beside the leaves' own places), sorted."""
    out: set[str] = set()

    def walk(value: Any, path: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(value, Mapping):
            if path:
                exact = path if _is_path(path) else "$." + path
                last = path.rsplit(".", 1)[-1]
                keyed = "[]" not in last
                out.add(exact + KEYS)
                if keyed:
                    out.add(last + KEYS)
                # A map's values only where they are all scalars (a name -> id map), not
                # an object's fields of every kind.
                if len(value) > 1 and all(_scalar(v) for v in value.values()):
                    out.add(exact + VALUES)
                    if keyed:
                        out.add(last + VALUES)
            for k, v in value.items():
                if isinstance(k, str) and k and "." not in k and "[]" not in k and KEYS not in k:
                    walk(v, f"{path}.{k}" if path else k, depth + 1)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v, path + "[]", depth + 1)

    walk(state, "", 0)
    return sorted(out)
