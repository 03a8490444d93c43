"""benchmarks/_forkcost.py: the helpers behind the cost columns of both comparisons."""

from __future__ import annotations

import pytest

import toolguard as tg
from benchmarks._forkcost import TimedFork, fastest, no_op_transaction, transactional


def test_fastest_keeps_each_calls_quickest_run_whole() -> None:
    runs = [[(0.5, "a1"), (0.2, "b1")], [(0.3, "a2"), (0.4, "b2")], [(0.9, "a3"), (0.1, "b3")]]
    assert fastest(runs, lambda r: r[0]) == [(0.3, "a2"), (0.1, "b3")]
    assert fastest([[3.0, 1.0], [2.0, 5.0]]) == [2.0, 1.0]
    assert fastest([]) == []


def test_fastest_refuses_runs_of_different_calls() -> None:
    with pytest.raises(ValueError):
        fastest([[1.0, 2.0], [1.0]])


class _Store:
    def __init__(self) -> None:
        self.n = 0


def test_a_timed_fork_alongside_another_counts_in_its_take() -> None:
    main = TimedFork(tg.UndoLogFork())
    reads = main.alongside(no_op_transaction())
    assert transactional(main) and transactional(reads)
    journal = main.fork(_Store())
    main.keep(journal)
    reads.keep(reads.fork(_Store()))
    _, forks = main.take()  # the seconds are not asserted: a test never depends on timing
    assert forks == 2
    assert main.take() == (0.0, 0) and reads.take() == (0.0, 0)


def test_the_no_op_transaction_journals_nothing() -> None:
    store = _Store()
    strategy = no_op_transaction()
    forked = strategy.fork(store)
    store.n = 5
    strategy.discard(forked)
    assert store.n == 5  # nothing was recorded, so nothing is undone
