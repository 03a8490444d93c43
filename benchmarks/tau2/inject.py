"""Seeded wrong-id injection: one id argument of one ground-truth call is replaced.

Three flavours per id kind:
- ``missing_<kind>``: an id of the right shape that exists nowhere in the database;
- ``foreign_<kind>``: an id that exists in the database but belongs to nobody in this task
  (never in the user's text nor in the ground-truth calls), e.g. another user's order;
- ``sibling_<kind>``: another order / reservation of the same user, one the task does not
  touch: the agent has legitimately seen it, so only the state can tell it is wrong (this
  class measures what the guard cannot catch).
The mutation point is not the error depth: the oracle replay of the mutated calls decides
that (``oracle.replay``), and silent ones show up as a final DB hash different from the
ground truth's.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.tau2._tau2 import _db_json
from benchmarks.tau2.tasks import Call, GroundTruth

# kind -> the argument names that carry it (list-valued ones hold several ids)
ID_ARGS: dict[str, dict[str, tuple[str, ...]]] = {
    "airline": {"user_id": ("user_id",), "reservation_id": ("reservation_id",)},
    "retail": {
        "user_id": ("user_id",),
        "order_id": ("order_id",),
        "item_id": ("item_ids", "new_item_ids"),
    },
}
# Foreign ids only make sense where another record of the same kind exists and is valid
# for the tool: another user, another user's reservation or order. An item id from another
# order is just "not in this order", already covered by missing_item_id.
FOREIGN_KINDS = ("user_id", "reservation_id", "order_id")


SIBLING_KINDS = ("reservation_id", "order_id")


def injection_classes(domain: str) -> list[str]:
    kinds = ID_ARGS[domain]
    return (
        [f"missing_{k}" for k in kinds]
        + [f"foreign_{k}" for k in kinds if k in FOREIGN_KINDS]
        + [f"sibling_{k}" for k in kinds if k in SIBLING_KINDS]
    )


@dataclass(frozen=True)
class Injection:
    cls: str
    step: int  # 1-based index of the mutated call (not necessarily where it fails)
    arg: str
    old: str
    new: str
    task: GroundTruth  # the mutated task: calls replaced, same user text

    @property
    def key(self) -> str:
        return f"{self.task.key}-{self.cls}"


def existing_ids(domain: str, kind: str) -> set[str]:
    db = _db_json(domain)
    if kind == "user_id":
        return set(db["users"])
    if kind == "reservation_id":
        return set(db["reservations"])
    if kind == "order_id":
        return set(db["orders"])
    if kind == "item_id":
        ids = {v for p in db["products"].values() for v in p["variants"]}
        ids |= {it["item_id"] for o in db["orders"].values() for it in o["items"]}
        return ids
    raise ValueError(f"unknown id kind {kind!r}")


def _sites(task: GroundTruth, kind: str) -> Iterator[tuple[int, str, int | None, str]]:
    """(step, arg, list index or None, value) for every occurrence of the id kind."""
    for step, call in enumerate(task.calls, start=1):
        for arg in ID_ARGS[task.domain][kind]:
            value = call.arguments.get(arg)
            if isinstance(value, str):
                yield step, arg, None, value
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, str):
                        yield step, arg, i, v


def _missing_id(rng: random.Random, kind: str, like: str, taken: set[str]) -> str:
    """A fresh id shaped like the real one, so only existence (not format) is wrong."""
    for _ in range(1000):
        if kind == "user_id":  # first_last_1234
            stem = like.rsplit("_", 1)[0]
            cand = f"{stem}_{rng.randrange(1000, 10000)}"
        elif kind == "reservation_id":  # 6 upper-case letters/digits
            cand = "".join(rng.choices(string.ascii_uppercase + string.digits, k=len(like)))
        elif kind == "order_id":  # #W1234567
            cand = "#W" + "".join(rng.choices(string.digits, k=len(like) - 2))
        else:  # item ids: 10 digits
            cand = "".join(rng.choices(string.digits, k=len(like)))
        if cand not in taken and cand != like:
            return cand
    raise RuntimeError(f"no fresh {kind} found")


def _foreign_id(rng: random.Random, task: GroundTruth, kind: str, taken: set[str]) -> str | None:
    seen = task.user_text + repr([c.arguments for c in task.calls])
    pool = sorted(i for i in taken if i not in seen)
    return rng.choice(pool) if pool else None


def _sibling_id(rng: random.Random, task: GroundTruth, kind: str, old: str) -> str | None:
    db = _db_json(task.domain)
    table = db["reservations"] if kind == "reservation_id" else db["orders"]
    if old not in table:
        return None
    owner = db["users"][table[old]["user_id"]]
    mine = owner["reservations"] if kind == "reservation_id" else owner["orders"]
    used = repr([c.arguments for c in task.calls])
    pool = sorted(i for i in mine if i != old and i not in used)
    return rng.choice(pool) if pool else None


def inject(task: GroundTruth, cls: str, seed: int) -> Injection | None:
    """The task with one id replaced, or None when the task has no such id."""
    flavour, kind = cls.split("_", 1)
    sites = list(_sites(task, kind))
    if not sites:
        return None
    # str seeds are hashed deterministically by random.Random (not by PYTHONHASHSEED)
    rng = random.Random(f"{seed}:{task.key}:{cls}")
    step, arg, index, old = rng.choice(sites)
    taken = existing_ids(task.domain, kind)
    if flavour == "missing":
        new = _missing_id(rng, kind, old, taken)
    elif flavour == "foreign":
        new = _foreign_id(rng, task, kind, taken)
    else:
        new = _sibling_id(rng, task, kind, old)
    if new is None:
        return None
    calls = list(task.calls)
    args: dict[str, Any] = dict(calls[step - 1].arguments)
    if index is None:
        args[arg] = new
    else:
        args[arg] = [*args[arg][:index], new, *args[arg][index + 1 :]]
    calls[step - 1] = Call(calls[step - 1].name, args)
    return Injection(cls, step, arg, old, new, replace(task, calls=tuple(calls)))
