"""Forks of a tau2 environment for the guard's dry run: a deep copy, and a copy on read.

tau2's database is a pydantic model whose fields are tables (``dict`` id -> record: users,
orders, reservations, flights, products). ``copy.deepcopy`` of it takes 0.3 to 1.3 s (the
airline database is 7 MB of JSON), several thousand times a tool call. The copy on read
forks it in tens of microseconds: a new model whose tables are shallow copies, each record
deep-copied the first time the fork reads it (by key, ``get``, ``values``, ``items``). The
fork never hands out an original record, so nothing the call does on the fork reaches the
real database; writes land in the fork's own tables. What it cannot see: a tool that reaches
a record through the real database by another path (none does in airline or retail), or
keeps a reference to one across calls.

The undo on read (:func:`begin_live`, with :func:`keep_live` and :func:`roll_back_live`: a
transactional ``tg.CallbackFork``) runs the call once on the real database instead: each
table is, for the call, a view that takes a record's pre-image (``model_dump``, about a third
of a dump-and-validate copy) the first time the call reads it. Accepted, nothing more is
done; rejected, the touched records are rebuilt from their pre-images.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, MutableMapping
from typing import Any

from pydantic import BaseModel

from benchmarks.tau2.specs import Live


def copy_record(value: Any) -> Any:
    """A deep copy of one record. A pydantic model goes through pydantic-core (dump, then
    validate: 2 to 4 times faster than ``copy.deepcopy`` here, and exact for models loaded
    from JSON as tau2's are); anything else through ``copy.deepcopy``."""
    if isinstance(value, BaseModel):
        return type(value).model_validate(value.model_dump())
    return copy.deepcopy(value)


class CopyOnRead(dict):  # type: ignore[type-arg]
    """One table of a forked database: the real records, each copied when first read."""

    __slots__ = ("_copied",)

    def __init__(self, source: dict[Any, Any]) -> None:
        super().__init__(source)
        self._copied: set[Any] = set()

    def __getitem__(self, key: Any) -> Any:
        value = dict.__getitem__(self, key)
        if key not in self._copied:
            value = copy_record(value)
            dict.__setitem__(self, key, value)
            self._copied.add(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self._copied.add(key)

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default  # noqa: SIM401 - self.get is this method

    def values(self) -> list[Any]:  # type: ignore[override]
        return [self[k] for k in self]

    def items(self) -> list[tuple[Any, Any]]:  # type: ignore[override]
        return [(k, self[k]) for k in self]

    def pop(self, key: Any, *default: Any) -> Any:
        if key not in self:
            return dict.pop(self, key, *default)
        value = self[key]
        dict.pop(self, key)
        return value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def copy(self) -> dict[Any, Any]:
        return dict(self.items())

    def popitem(self) -> tuple[Any, Any]:
        raise NotImplementedError("popitem on a forked tau2 table")

    # __iter__ stays dict's own: keys are immutable, and dict(table) of a fork then takes the
    # fast path (the records as they are, copied again when that fork reads them).


def lazy_db(db: Any) -> Any:
    """A fork of a tau2 database model: every table copied on read."""
    tables = {k: CopyOnRead(v) for k, v in db.__dict__.items() if isinstance(v, dict)}
    return db.model_copy(update=tables)


def lazy_environment(env: Any) -> Any:
    """A tau2 Environment whose tools run on a copy-on-read fork of its database."""
    forked = copy.copy(env)
    forked.tools = copy.copy(env.tools)
    forked.tools.db = lazy_db(env.tools.db)
    return forked


def fork_live(live: Live) -> Live:
    """``CallbackFork`` fork: the harness's state (``Live``) around a forked environment."""
    return Live(env=lazy_environment(live.env))


def deep_copy_live(live: Live) -> Live:
    """What ``tg.DeepCopyFork()`` does to the same state, for the cost comparison."""
    return copy.deepcopy(live)


# -- in place: the call runs once on the real database, its records' pre-images kept ---------

_ABSENT = object()


class JournaledTable(MutableMapping):  # type: ignore[type-arg]
    """One table of the real database during one call: reads hand out the real records,
    each one's pre-image (a ``model_dump``) taken the first time the call reaches it; writes
    go to the real table. ``rollback`` puts back what was there before the call."""

    __slots__ = ("before", "real")

    def __init__(self, real: dict[Any, Any]) -> None:
        self.real = real
        self.before: dict[Any, Any] = {}  # key -> (model class, dump), a deep copy, or _ABSENT

    def _note(self, key: Any) -> None:
        if key in self.before:
            return
        value = self.real.get(key, _ABSENT)
        if value is _ABSENT:
            self.before[key] = _ABSENT
        elif isinstance(value, BaseModel):
            self.before[key] = (type(value), value.model_dump())
        else:
            self.before[key] = copy.deepcopy(value)

    def __getitem__(self, key: Any) -> Any:
        value = self.real[key]
        self._note(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        self._note(key)
        self.real[key] = value

    def __delitem__(self, key: Any) -> None:
        self._note(key)
        del self.real[key]

    def __contains__(self, key: object) -> bool:
        return key in self.real

    def __iter__(self) -> Iterator[Any]:
        return iter(self.real)

    def __len__(self) -> int:
        return len(self.real)

    def rollback(self) -> None:
        for key, before in self.before.items():
            if before is _ABSENT:
                self.real.pop(key, None)
            elif isinstance(before, tuple):
                model, dump = before
                self.real[key] = model.model_validate(dump)
            else:
                self.real[key] = before


class _Transaction:
    __slots__ = ("db", "tables")

    def __init__(self, db: Any) -> None:
        self.db = db
        self.tables = {k: JournaledTable(v) for k, v in db.__dict__.items() if isinstance(v, dict)}
        db.__dict__.update(self.tables)

    def close(self, rollback: bool) -> None:
        for name, table in self.tables.items():
            self.db.__dict__[name] = table.real
            if rollback:
                table.rollback()


def begin_live(live: Live) -> _Transaction:
    """``CallbackFork(in_place=True)`` fork: journal the real database's tables."""
    return _Transaction(live.db)


def keep_live(transaction: _Transaction) -> None:
    transaction.close(rollback=False)


def roll_back_live(transaction: _Transaction) -> None:
    transaction.close(rollback=True)
