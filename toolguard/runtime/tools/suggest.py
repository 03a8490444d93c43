"""'Did you mean ...?' for an unknown tool name, bounded in time among many tools.

Among up to ``EXACT_LIMIT`` names the answer is ``difflib.get_close_matches`` over all of
them, as it always was. Among more, comparing the name with every tool would cost about a
millisecond per thousand tools at every misspelt call, so difflib ranks only a few
candidates found by index:

- the names one edit away from it, or two when the edits are one on each side (a changed,
  added, dropped or swapped character): a deletion index, every name under itself and under
  each way of dropping one of its characters (names of at most 64 characters);
- the ``NEIGHBOURS`` names on each side of it in sorted order (the longest shared
  prefixes: ``get_weather`` for ``get_weather_now``), and the same by reversed name (the
  longest shared suffixes).

The index is built the first time a misspelt name meets more than ``EXACT_LIMIT`` tools,
then kept up to date. Names longer than 128 characters are never suggested among many.
"""

from __future__ import annotations

import bisect
import difflib

EXACT_LIMIT = 200
NEIGHBOURS = 3
_INDEXED = 64  # longest name in the deletion index
_SHOWN = 128  # longest name suggested among many


class ToolNames:
    """The names of a guard's tools, for suggestions."""

    def __init__(self, exact_limit: int = EXACT_LIMIT, neighbours: int = NEIGHBOURS) -> None:
        self.exact_limit = exact_limit
        self.neighbours = neighbours
        self._names: dict[str, None] = {}  # in registration order, as the guard's tool dict
        self._sorted: list[str] | None = None  # built on demand, with the two below
        self._backwards: list[str] = []  # each name reversed, sorted
        self._deletions: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return len(self._names)

    def add(self, name: str) -> None:
        if name in self._names:
            return
        self._names[name] = None
        if self._sorted is not None:
            self._index(name)

    def close(self, word: str, n: int = 3) -> list[str]:
        """At most ``n`` names close to ``word``, best first (difflib's order)."""
        if len(self._names) <= self.exact_limit:
            return difflib.get_close_matches(word, self._names, n=n)
        if self._sorted is None:
            self._sorted = []
            for name in self._names:
                self._index(name)
        return difflib.get_close_matches(word, self._candidates(word), n=n)

    def _index(self, name: str) -> None:
        if len(name) > _SHOWN:
            return
        assert self._sorted is not None
        bisect.insort(self._sorted, name)
        bisect.insort(self._backwards, name[::-1])
        if len(name) <= _INDEXED:
            for key in _variants(name):
                self._deletions.setdefault(key, []).append(name)

    def _candidates(self, word: str) -> set[str]:
        assert self._sorted is not None
        found: set[str] = set()
        if len(word) <= _INDEXED:
            deletions = self._deletions
            for key in _variants(word):
                names = deletions.get(key)
                if names:
                    found.update(names[: self.neighbours * 4])
        k = self.neighbours
        names = self._sorted
        at = bisect.bisect_left(names, word)
        found.update(names[max(0, at - k) : at + k])
        backwards = self._backwards
        drow = word[::-1]
        at = bisect.bisect_left(backwards, drow)
        found.update(name[::-1] for name in backwards[max(0, at - k) : at + k])
        return found


def _variants(name: str) -> set[str]:
    """The name and each way of dropping one of its characters."""
    out = {name[:i] + name[i + 1 :] for i in range(len(name))}
    out.add(name)
    return out
