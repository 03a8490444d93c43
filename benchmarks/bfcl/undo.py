"""Does ``tg.UndoLogFork`` undo exactly, and keep exactly, on BFCL's real backends?

The comparison runs the undo-log configurations in log mode, where every call is kept: a
rollback never happens there. This check exercises both sides on every call of every
trajectory (ground truth and each seeded mutation), outside the guard, with the undo log's
own ``fork``/``keep``/``discard``:

- **rollback**: the call runs inside the log and is rolled back; the backend must then equal
  what it was before, value for value, dict order and object identities included (a full
  snapshot of the instance's object graph, random generator state included);
- **keep**: the call runs again inside the log and is kept; the backend must then equal a
  plain backend that ran the same calls with no log (timestamps from ``datetime.now()``
  aside), and both must have answered the same.
"""

from __future__ import annotations

import collections
import copy
import datetime
import random
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import toolguard as tg
from benchmarks.bfcl.data import Call, Task, load_category
from benchmarks.bfcl.env import Environment
from benchmarks.bfcl.mutations import mutate


def snapshot(root: Any, *, clock: bool = True) -> Any:
    """The object graph under ``root`` as plain data: shared objects and cycles by the order
    they are first met, sets sorted. ``clock=False`` blanks datetimes (two runs differ)."""
    seen: dict[int, int] = {}

    def walk(x: Any) -> Any:
        if isinstance(x, datetime.datetime) and not clock:
            return "<now>"
        if isinstance(x, random.Random):
            return ("random", x.getstate())
        if isinstance(x, dict):
            return ("dict", [(k, walk(v)) for k, v in x.items()])
        if isinstance(x, list | tuple | collections.deque):
            return (type(x).__name__, [walk(v) for v in x])
        if isinstance(x, set | frozenset):
            return ("set", sorted(map(repr, x)))
        if hasattr(x, "__dict__") and not isinstance(x, type):
            if id(x) in seen:
                return ("ref", seen[id(x)])
            seen[id(x)] = len(seen)
            return (type(x).__qualname__, [(k, walk(v)) for k, v in vars(x).items()])
        return x

    return walk(root)


def _answer(method: Any, kwargs: dict[str, Any]) -> tuple[str, str]:
    try:
        return "ok", repr(method(**copy.deepcopy(kwargs)))
    except Exception as exc:  # the environment's rejection: part of its answer
        return "raised", f"{type(exc).__name__}: {exc}"


def check_calls(task: Task, calls: Sequence[tuple[int, Call]]) -> dict[str, int]:
    """Rollback and keep on every call of one trajectory (module doc)."""
    undo = tg.UndoLogFork()
    plain, logged = Environment(task), Environment(task)
    out = collections.Counter(calls=0, rollback_exact=0, keep_exact=0, same_answer=0)
    for _, call in calls:
        method = logged.methods.get(call.name)
        if method is None:  # a tool the backends do not have: nothing runs
            continue
        kwargs = logged.normalise(call)
        instance = logged.instances[logged.owner[call.name]]
        before = snapshot(instance)
        journal = undo.fork(instance)
        _answer(method, kwargs)
        undo.discard(journal)
        out["rollback_exact"] += snapshot(instance) == before
        journal = undo.fork(instance)
        answer = _answer(method, kwargs)
        undo.keep(journal)
        expected = _answer(plain.methods[call.name], plain.normalise(call))
        mirror = plain.instances[plain.owner[call.name]]
        out["keep_exact"] += snapshot(instance, clock=False) == snapshot(mirror, clock=False)
        out["same_answer"] += answer == expected
        out["calls"] += 1
    return dict(out)


def _job(job: tuple[str, int, tuple[str, ...], int]) -> dict[str, int]:
    category, index, kinds, seed = job
    task = load_category(category)[index]
    total: collections.Counter[str] = collections.Counter(trajectories=1)
    total.update(check_calls(task, task.flat_calls()))
    for kind in kinds:
        m = mutate(task, kind, seed)
        if m is not None:
            total.update(check_calls(task, m.calls))
            total["trajectories"] += 1
    return dict(total)


def check_all(
    tasks: Sequence[Task], kinds: Sequence[str], seed: int = 0, jobs: int = 2
) -> dict[str, int]:
    """The counts over every trajectory: calls, rollback_exact, keep_exact, same_answer."""
    index = {t.id: i for c in dict.fromkeys(t.category for t in tasks) for i, t in
             enumerate(load_category(c))}  # fmt: skip
    work = [(t.category, index[t.id], tuple(kinds), seed) for t in tasks]
    total: collections.Counter[str] = collections.Counter()
    if jobs <= 1:
        for w in work:
            total.update(_job(w))
    else:
        with ProcessPoolExecutor(jobs) as ex:
            for counts in ex.map(_job, work, chunksize=4):
                total.update(counts)
    return dict(total)


def markdown(counts: dict[str, int]) -> list[str]:
    calls = counts.get("calls", 0)

    def share(key: str) -> str:
        return f"{counts.get(key, 0)}/{calls}"

    exact = calls and all(counts.get(k) == calls for k in ("rollback_exact", "keep_exact"))
    return [
        f"Every call of {counts.get('trajectories', 0)} trajectories (ground truth and "
        f"mutations), outside the guard: rolled back, the backend equals its snapshot from "
        f"before the call on {share('rollback_exact')} calls; kept, it equals a backend that "
        f"ran the same calls without a log on {share('keep_exact')} (answers identical on "
        f"{share('same_answer')}). Undo log exact: **{'yes' if exact else 'NO'}**.",
    ]
