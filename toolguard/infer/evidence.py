"""The evidence of one (tool, argument path), aggregated as the runs are read.

A rule reads of its evidence only counts: how many values pass a test, in how many
trajectories, how many distinct values, and the first few failing trajectory ids. So each
record (a ``flow.Leaf``, a ``lifetime.After``) is its *signature*: every field but the run,
the value and its key. Per signature the tally keeps how many records had it, their distinct
value keys (``keys.KeySet``, where the caller gives one) and the ``MAX_COUNTEREXAMPLES``
smallest run ids; per trajectory, at its end, the set of signatures it had, counted in a
``Counter``. The number of signatures and of signature sets depends on the tools' structure
(which places produce a value, whether the user gave it), not on how many runs there are.

Then, for any test ``P`` of a signature, exactly as over the records:

- records passing ``P``: the sum of their signatures' counts;
- trajectories holding one: the sum of the counts of the signature sets that contain a
  signature passing ``P`` (a run is counted once, however many of its records pass);
- distinct values: the size of the union of the passing signatures' key sets;
- the first failing trajectory ids, sorted: the smallest of a union are among the smallest of
  its members, so the members' first few suffice.

A run must be added once, with every record it has (``add_run``); run ids are expected to be
unique, as the readers and the CLI make them (a repeated id counts as another trajectory).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from itertools import chain
from typing import Generic, TypeVar

from .keys import KeySet, union_size

MAX_COUNTEREXAMPLES = 3  # trajectory ids a rule's comment names

S = TypeVar("S", bound=Hashable)


def keep_smallest(kept: list[str], item: str, limit: int) -> None:
    """Keep in ``kept`` (sorted, distinct) the ``limit`` smallest items seen."""
    at = bisect.bisect_left(kept, item)
    if at < len(kept) and kept[at] == item:
        return
    if at < limit:
        kept.insert(at, item)
        del kept[limit:]


class Tally(Generic[S]):
    """One (tool, path)'s records, by signature (module docstring)."""

    __slots__ = ("_same", "counts", "first", "keys", "runs")

    def __init__(self) -> None:
        self.counts: dict[S, int] = {}
        self.keys: dict[S, KeySet] = {}
        self.first: dict[S, list[str]] = {}
        self.runs: Counter[frozenset[S]] = Counter()
        # One object per signature: a run's records are equal to earlier ones but new
        # objects, which the signature sets would otherwise keep alive, one copy per set.
        self._same: dict[S, S] = {}

    def add_run(self, run: str, records: Iterable[tuple[S, int | None]]) -> None:
        """One trajectory's records of this path: each signature with its value's key, or
        None where no rule counts that signature's distinct values (a common value)."""
        had: set[S] = set()
        for record, key in records:
            sig = self._same.setdefault(record, record)
            self.counts[sig] = self.counts.get(sig, 0) + 1
            if key is not None:
                keys = self.keys.get(sig)
                if keys is None:
                    keys = self.keys[sig] = KeySet()
                keys.add(key)
            had.add(sig)
        for sig in had:
            keep_smallest(self.first.setdefault(sig, []), run, MAX_COUNTEREXAMPLES)
        self.runs[frozenset(had)] += 1

    def total(self) -> int:
        return sum(self.counts.values())

    def count(self, test: Callable[[S], bool]) -> int:
        """Records whose signature passes ``test``."""
        return sum(n for sig, n in self.counts.items() if test(sig))

    def trajectories(self, test: Callable[[S], bool]) -> int:
        """Trajectories with at least one record passing ``test``."""
        passing = {sig for sig in self.counts if test(sig)}
        if not passing:
            return 0
        return sum(n for sigs, n in self.runs.items() if not passing.isdisjoint(sigs))

    def distinct(self, test: Callable[[S], bool]) -> int:
        """Distinct value keys among the records passing ``test`` (every passing signature
        must have been given keys: a KeyError otherwise, never a wrong count)."""
        passing = [self.keys[sig] for sig in self.counts if test(sig)]
        return union_size(passing) if passing else 0

    def first_runs(self, test: Callable[[S], bool]) -> list[str]:
        """The ``MAX_COUNTEREXAMPLES`` smallest ids of trajectories with a record passing
        ``test``, sorted."""
        ids = chain.from_iterable(self.first[sig] for sig in self.counts if test(sig))
        return sorted(set(ids))[:MAX_COUNTEREXAMPLES]

    def entries(self) -> int:
        """How many aggregated entries the tally holds (signatures and signature sets): what
        grows only with the input's structure."""
        return len(self.counts) + len(self.runs)
