"""A set of 64-bit value keys (``values.value_key``) in 8 bytes a key, and the size of a union.

A rule's comment prints how many distinct values its evidence held, exactly, so the keys
themselves must be kept: a Python ``set`` of ints costs about 70 bytes a key, a sorted
``array('Q')`` 8. New keys wait in a small set and are merged into the array once they
outnumber an eighth of it, so the merges are logarithmically many and each is one sort of
two sorted runs (linear in C). What still grows is one key per distinct value (not per
call): the count printed is exact, which no fixed memory can give.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from itertools import chain

_PENDING = 256  # at least this many new keys wait before a merge


class KeySet:
    """Distinct 64-bit keys; ``add`` and ``len`` only (the keys are never read back)."""

    __slots__ = ("_new", "_sorted")

    def __init__(self) -> None:
        self._sorted = array("Q")
        self._new: set[int] = set()

    def add(self, key: int) -> None:
        if key in self._new or self._holds(key):
            return
        self._new.add(key)
        if len(self._new) > max(_PENDING, len(self._sorted) >> 3):
            self._merge()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._new)

    def merged(self) -> array[int]:
        """Every key, sorted (the pending ones merged first)."""
        if self._new:
            self._merge()
        return self._sorted

    def _holds(self, key: int) -> bool:
        at = bisect_left(self._sorted, key)
        return at < len(self._sorted) and self._sorted[at] == key

    def _merge(self) -> None:
        # Both parts are sorted runs already: timsort merges them in one linear pass.
        self._sorted = array("Q", sorted(chain(self._sorted, self._new)))
        self._new = set()


def union_size(sets: Iterable[KeySet]) -> int:
    """How many distinct keys the sets hold together, without building the union."""
    arrays = [s.merged() for s in sets]
    if len(arrays) == 1:
        return len(arrays[0])
    count = 0
    last: int | None = None
    for key in heapq.merge(*arrays):
        if key != last:
            count += 1
            last = key
    return count
