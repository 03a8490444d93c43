"""The scalar leaves of arguments and results, each at its path, and which values are too
common to say where a value came from.

Paths are those of the contract file: an argument ``arg``, ``arg.field`` or ``arg[].field``
(a top-level list of scalars is ``arg`` itself: ``refs`` checks each item; a nested one is
``arg[].tags[]``, as ``refs`` reads it item by item only then); a place in a result
``$.key``, ``items[].id``, ``[]`` (a list of scalars) or ``$`` (a scalar result). Keys holding
``.`` or ``[]`` cannot be written as a path and are passed over.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..runtime.initial_state import finder

MAX_DEPTH = 20  # as the guard's own walks: deeper values are never bound
# An initial state with more mapping places than this is not traced (flow.trace_runs). BFCL's
# largest task configuration has 75; a database dumped whole has tens of thousands.
MAX_INITIAL_PLACES = 5_000
# The producer "tool" of a value the environment's initial state held: its places are a
# contract's ``[initial]`` table, not a tool's ``produces``.
INITIAL = "(initial state)"


@dataclass(frozen=True, slots=True)
class CommonRule:
    """Values too common to carry information about where they came from: booleans, None,
    integers with ``abs(n) < min_int``, strings shorter than ``min_length`` characters
    (after stripping), and members of the argument's schema enum. Such a value is never
    evidence for a rule; it is still checked against a proposed rule (the guard checks it).
    With ``named_ids``, a small integer is evidence where :func:`named_id` says so."""

    min_length: int = 3
    min_int: int = 100
    named_ids: bool = True  # a small integer a result produced as a matching id is evidence

    def common(self, value: Any, enum: frozenset[Any] = frozenset()) -> bool:
        if value is None or isinstance(value, bool):
            return True
        if isinstance(value, int):
            return abs(value) < self.min_int
        if isinstance(value, str):
            return len(value.strip()) < self.min_length or value in enum
        if isinstance(value, float):
            return abs(value) < self.min_int
        return True


def named_id(value: Any, path: str, producers: Iterable[tuple[str, str]]) -> bool:
    """A small integer that is still evidence: an earlier result produced it under a key
    naming an id that the argument's own name agrees with (``id`` or ``tweet_id`` for
    ``tweet_id``), as backends numbering their records from 0 do. A small number elsewhere
    (a count, a page) stays too common."""
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    argument = path.rsplit(".", 1)[-1].removesuffix("[]")
    for _, place in producers:
        key = place.removeprefix("$.").rsplit(".", 1)[-1].removesuffix("[]")
        if (key == "id" or key.endswith("_id")) and (
            argument == key or argument.endswith("_" + key)
        ):
            return True
    return False


def value_key(value: Any) -> int:
    """A stable 64-bit key of a scalar, for counting distinct values without keeping them
    (the same in every process, unlike ``hash`` of a string)."""
    text = value if isinstance(value, str) else f"{type(value).__name__}:{value!r}"
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _ok_key(key: Any) -> bool:
    return isinstance(key, str) and bool(key) and "." not in key and "[]" not in key


def scalar(value: Any) -> bool:
    """A leaf the guard may bind or check by value (booleans too: ``True == 1``)."""
    return isinstance(value, str | int | float)


def argument_leaves(arguments: Mapping[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    """(path, value, top): every scalar leaf of the arguments; ``top`` when the argument is
    itself the scalar (only such an argument can be ``grounded``)."""
    for key in sorted(arguments, key=str):
        if not _ok_key(key):
            continue
        value = arguments[key]
        if scalar(value):
            yield key, value, True
        elif isinstance(value, list | tuple):
            for item in value:
                if scalar(item):
                    yield key, item, False
                else:
                    yield from _nested(item, key + "[]", 1)
        else:
            yield from _nested(value, key, 1)


def _nested(value: Any, path: str, depth: int) -> Iterator[tuple[str, Any, bool]]:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            if not _ok_key(key):
                continue
            item = value[key]
            if scalar(item):
                yield f"{path}.{key}", item, False
            elif isinstance(item, list | tuple) and all(scalar(x) for x in item):
                # `refs` reads a nested list item by item only with its `[]` (the whole
                # list is compared otherwise); a top-level list needs none.
                for x in item:
                    yield f"{path}.{key}[]", x, False
            else:
                yield from _nested(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _nested(item, path + "[]", depth + 1)


def result_leaves(result: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(place, value): every scalar leaf of a result, at the ``produces`` place that finds
    it (a place that reaches it exactly, not a key name found anywhere)."""
    if depth > MAX_DEPTH:
        return
    if isinstance(result, Mapping):
        for key, value in result.items():
            if _ok_key(key):
                yield from result_leaves(value, f"{path}.{key}" if path else key, depth + 1)
    elif isinstance(result, list | tuple):
        for item in result:
            yield from result_leaves(item, path + "[]", depth + 1)
    elif scalar(result):
        yield place_of(path), result


def key_place(place: str) -> str | None:
    """The key-name place that finds a leaf at ``place`` too (``produces."id"`` finds every
    ``id`` key, at any depth, and each scalar of a list under it): the last key of the path.
    It is one place where the exact paths are many (records keyed by data:
    ``variants.<id>.item_id``). None for a whole result, a list of lists, or a top-level
    list."""
    last = place.removeprefix("$.").rsplit(".", 1)[-1]
    if last.endswith("[]"):
        last = last[:-2]
    if not last or place == "$" or "[]" in last:
        return None
    return last


def is_key_place(place: str) -> bool:
    """A key-name place (as :func:`key_place` writes it, or an initial state's ``KEY{}`` /
    ``KEY.*``), not an exact path."""
    base = place.removesuffix("{}")
    base = base.removesuffix(".*") if base == place else base
    return place != "$" and "." not in base and "[]" not in base


def place_of(path: str) -> str:
    """The path as a ``produces`` place: a bare key would be "that key anywhere", so a
    top-level key is written ``$.key``; the whole result is ``$``."""
    if not path:
        return "$"
    if "." in path or "[]" in path:
        return path
    return "$." + path


def initial_leaves(state: Any, places: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """(place, value): every value of the environment's initial state at each ``[initial]``
    place that finds it: a leaf's exact path and key name (as in a result), and the keys of
    every mapping (``PATH{}``, ``KEY{}``: records keyed by their ids), each found by the
    finder a replay uses, so inference and replay agree. ``places``: the state's
    ``candidate_places`` (the caller counts them first)."""
    for place, value in result_leaves(state):
        if place == "$":
            continue
        yield place, value
        key = key_place(place)
        if key is not None:
            yield key, value
    for place in places:
        for value in finder(place)(state):
            yield place, value
