"""Journaling runs none of the state's own code (issue: "journaling must not run user code").

The undo log swaps classes and dicts through the builtin descriptors, never through an
object's ``__setattr__``; a class whose hooks would run when a stand-in is made (its own
``__init_subclass__``), or whose layout has slots, is recorded by a copy instead. A random
program of reads, writes and deletes over objects with audited ``__setattr__`` /
``__delattr__``, a refusing ``__setattr__``, slots beside a ``__dict__``, properties, a
``__getattr__`` fallback, shadowed class attributes and a subclass registry sees exactly what
a plain run sees, its hooks see exactly the plain run's writes, and a rollback leaves every
object and the audit as they were after construction.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard.runtime.forks.undolog import Journal

audit: list[tuple[str, str]] = []  # outside the state: what the hooks saw
registry: list[type] = []


class Audited:
    label = "class label"  # shadowed by an instance value

    def __init__(self) -> None:
        self.name = "audited"
        self.items = [1]
        self.label = "instance label"

    def __setattr__(self, name: str, value: Any) -> None:
        audit.append(("set", name))
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        audit.append(("del", name))
        object.__delattr__(self, name)


class Frozen:
    def __init__(self) -> None:
        object.__setattr__(self, "name", "frozen")
        object.__setattr__(self, "items", [2])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")


class Mixed:
    __slots__ = ("__dict__", "slot")

    def __init__(self) -> None:
        self.slot = [3]
        self.name = "mixed"


class WithProperty:
    def __init__(self) -> None:
        self._value = [4]
        self.name = "prop"

    @property
    def items(self) -> list[int]:
        audit.append(("get", "items"))
        return self._value

    @items.setter
    def items(self, value: list[int]) -> None:
        audit.append(("set", "items"))
        self._value = value


class Fallback:
    def __init__(self) -> None:
        self.name = "fallback"
        self.items = [5]

    def __getattr__(self, name: str) -> str:
        audit.append(("fallback", name))
        return f"fallback {name}"


class Registered:
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        registry.append(cls)

    def __init__(self) -> None:
        self.name = "registered"
        self.items = [6]


CLASSES = (Audited, Frozen, Mixed, WithProperty, Fallback, Registered)
NAMES = ("name", "items", "label", "slot", "missing")
PROGRAM = st.lists(
    st.tuples(
        st.sampled_from(["read", "write", "delete", "append"]),
        st.integers(0, len(CLASSES) - 1),
        st.sampled_from(NAMES),
    ),
    max_size=12,
)


def holder() -> dict[str, Any]:
    return {cls.__name__: cls() for cls in CLASSES}


def run(state: dict[str, Any], program: list[tuple[str, int, str]]) -> list[Any]:
    """What each step saw: a value, or the type and text of the error it raised."""
    seen: list[Any] = []
    for action, index, name in program:
        obj = state[CLASSES[index].__name__]
        try:
            if action == "read":
                seen.append(repr(getattr(obj, name)))
            elif action == "write":
                setattr(obj, name, [index])
                seen.append("written")
            elif action == "delete":
                delattr(obj, name)
                seen.append("deleted")
            else:
                getattr(obj, name).append(index)
                seen.append("appended")
        except (AttributeError, TypeError) as exc:
            seen.append((type(exc).__name__, str(exc)))
    return seen


def snapshot(state: dict[str, Any]) -> Any:
    out = {}
    for key, obj in state.items():
        attrs = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
        if hasattr(obj, "slot"):
            attrs["<slot>"] = obj.slot
        out[key] = (type(obj), repr(attrs))
    return out


@settings(max_examples=300, deadline=None)
@given(program=PROGRAM, keep=st.booleans())
def test_the_hooks_see_only_the_calls_own_work(
    program: list[tuple[str, int, str]], keep: bool
) -> None:
    registered = list(registry)
    audit.clear()
    plain_state = holder()
    plain_after_init = snapshot(plain_state)
    audit.clear()
    plain_seen = run(plain_state, program)
    plain_audit = list(audit)

    state = holder()
    before = snapshot(state)
    assert before == plain_after_init
    audit.clear()
    journal = Journal()
    assert journal.track(state)
    assert audit == []  # entering ran no hook
    seen = run(state, program)
    assert seen == plain_seen
    assert audit == plain_audit  # the hooks saw the call's own reads and writes, no more
    journal.keep() if keep else journal.rollback()
    assert audit == plain_audit  # nor did closing
    assert snapshot(state) == (snapshot(plain_state) if keep else before)
    assert registry == registered  # no stand-in subclass was made of a registering class
    assert all(type(obj) is cls for obj, cls in zip(state.values(), CLASSES, strict=True))
