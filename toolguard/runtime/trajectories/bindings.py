"""Bound values: which values of which kind a later call may refer to (the dependency check),
live or made stale, and who produced them. One type, :class:`Binding`, for a trajectory's
bindings and for what a verified plan's steps would produce (``plans/check.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class Binding:
    """One value's binding. Frozen: the values one call produces share one binding, so
    invalidating a value replaces its binding."""

    live: bool
    produced_by: str
    step: int | None
    invalidated_by: str | None = None
    shown: bool = True  # the model has seen it: it may be offered in a rejection's message


_HASHABLE = frozenset({str, int, float, bool, bytes})  # no hash probe needed


def _key(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return None
    return value


class Bindings:
    """Values by kind, each with its :class:`Binding`. None and unhashable values are never
    bound: nothing a later call could refer to by value."""

    __slots__ = ("by_kind", "unread")

    def __init__(self) -> None:
        self.by_kind: dict[str, dict[Any, Binding]] = {}
        # kind -> the last tool whose result of that kind could not be read (a one-shot
        # iterator, calls/record.py): what a rejection for an unknown one names.
        self.unread: dict[str, str] = {}

    def produce(
        self, kind: str, value: Any, source: str, step: int | None, shown: bool = True
    ) -> None:
        key = _key(value)
        if key is None:
            return
        self.by_kind.setdefault(kind, {})[key] = Binding(True, source, step, None, shown)

    def produce_all(self, kind: str, values: list[Any], source: str, step: int | None) -> None:
        """What one call produced: every value gets the same binding (one object)."""
        known = self.by_kind.get(kind)
        binding = Binding(True, source, step, None, True)
        if values and _HASHABLE.issuperset(map(type, values)):  # plain ids (most): bound at once
            if known is None:
                known = self.by_kind.setdefault(kind, {})
            known.update(dict.fromkeys(values, binding))
            return
        for value in values:
            if value is None:
                continue
            if type(value) not in _HASHABLE:
                try:
                    hash(value)
                except TypeError:
                    continue
            if known is None:
                known = self.by_kind.setdefault(kind, {})
            known[value] = binding

    def invalidate(self, kind: str, value: Any, by: str) -> None:
        """``value`` is a stale ``kind`` from now on (``by`` says who made it so)."""
        values = self.by_kind.get(kind, {})
        key = _key(value)
        binding = values.get(key)
        if binding is None:  # bound as the text it converts from (a UUID's string): that one
            key = self._same_text(kind, value)
            binding = values.get(key) if key is not None else None
        if binding is not None:
            values[key] = Binding(False, binding.produced_by, binding.step, by, binding.shown)

    def lookup(self, kind: str, value: Any) -> Binding | None:
        key = _key(value)
        return None if key is None else self.by_kind.get(kind, {}).get(key)

    def find(self, kind: str, value: Any) -> Binding | None:
        """:meth:`lookup`, else the binding of a value written the same (:meth:`lookup_text`):
        what the dependency check asks."""
        found = self.lookup(kind, value)
        return found if found is not None else self.lookup_text(kind, value)

    def lookup_text(self, kind: str, value: Any) -> Binding | None:
        """The binding of a ``kind`` value written as ``value`` is, or None. The model copies
        an id as JSON text and the tool's parameter type converts it: ``"42"`` for a
        result's ``42`` where the parameter is a ``str``, a ``UUID`` made of a result's
        string. Asked only after :meth:`lookup` found nothing (a scan of the kind)."""
        key = self._same_text(kind, value)
        return None if key is None else self.by_kind[kind][key]

    def _same_text(self, kind: str, value: Any) -> Any:
        """The bound ``kind`` value written as ``value`` is (a live one first), or None.
        Booleans are never ids written "True"."""
        if type(value) is bool:
            return None
        try:
            text = str(value)
        except Exception:
            return None
        found = None
        kind_of_value = type(value)
        for bound, binding in self.by_kind.get(kind, {}).items():
            # A key of the value's own type was looked up already (an equal string is the
            # same key), and booleans are no ids: what is left is mostly what converts.
            if type(bound) is kind_of_value or type(bound) is bool:
                continue
            try:
                same = str(bound) == text
            except Exception:
                continue
            if same:
                if binding.live:
                    return bound
                found = bound
        return found

    def kinds_of(self, value: Any) -> list[str]:
        key = _key(value)
        return [k for k, values in self.by_kind.items() if key in values]

    def live_values(self, kind: str, *, shown_only: bool = False) -> list[Any]:
        """Values of ``kind`` usable now; ``shown_only``: only those the model has seen."""
        return [
            v
            for v, b in self.by_kind.get(kind, {}).items()
            if b.live and (b.shown or not shown_only)
        ]
