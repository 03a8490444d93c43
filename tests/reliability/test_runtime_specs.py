"""A ToolSpec shared by many guards: its compiled tools live only as long as a guard uses them.

Builds are counted and entries and live guards are counted after a collection, never timed or
measured in bytes.
"""

from __future__ import annotations

import gc
import pickle
import weakref
from typing import Annotated, Any

import pytest

import toolguard as tg
from toolguard.runtime.tools import spec as spec_module
from toolguard.runtime.tools import tool as tool_module


def lookup(state: Annotated[dict[str, Any], tg.State], key: str) -> Any:
    return state.get(key)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[tool_module.Tool]:
    """Every Tool the specs compile, in order (held weakly, so counting keeps none alive)."""
    built: list[Any] = []

    class Counted(tool_module.Tool):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(weakref.ref(self))

    monkeypatch.setattr(spec_module, "Tool", Counted)  # what ToolSpec.compile builds
    return built


@pytest.mark.parametrize("own_fork", [False, True], ids=["shared-tool", "a-fork-per-guard"])
def test_dropped_guards_leave_nothing_in_a_shared_spec(own_fork: bool, builds) -> None:
    # A fork strategy per guard is part of the cache key: before, each guard added an entry
    # that held its compiled tool (and the strategy) for as long as the spec lived.
    spec = tg.ToolSpec(refs={})
    # The guards are held until all are built: a guard dropped earlier may take the shared
    # compiled tool with it (held weakly) whenever a collection happens to run, and the next
    # guard then compiles it again, which says nothing about what dropping them leaves.
    alive: list[tg.Guard] = []
    for _ in range(1_000):
        guard = tg.Guard(state={}, dry_run=tg.DeepCopyFork() if own_fork else None)
        guard.register(lookup, spec)
        alive.append(guard)
    guards = [weakref.ref(g) for g in alive]
    del guard, alive
    assert len(builds) == (1_000 if own_fork else 1)
    gc.collect()
    assert [g for g in guards if g() is not None] == []
    assert len(spec._compiled) == 0
    assert [t for t in builds if t() is not None] == []


def test_live_guards_share_one_compiled_tool(builds) -> None:
    schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    spec = tg.ToolSpec(name="lookup", json_schema=schema)  # declared under its own name
    guards = [tg.Guard() for _ in range(50)]
    tools = [g.declare("lookup", spec) for g in guards]
    gc.collect()  # nothing but the guards holds the compiled tool: it must survive this
    tools += [g.declare("lookup", spec, replace=True) for g in guards]
    assert len(builds) == 1
    assert all(t is tools[0] for t in tools)
    assert len(spec._compiled) == 1
    del guards, tools
    gc.collect()
    assert len(spec._compiled) == 0
    tg.Guard().declare("lookup", spec)
    assert len(builds) == 2  # built again once nobody held it


def test_a_spec_still_pickles_and_copies_once_compiled() -> None:
    spec = tg.ToolSpec(name="lookup", json_schema={"type": "object"}, refs={})
    guard = tg.Guard()
    guard.declare("lookup", spec)
    # The cache holds weak references, which do not pickle: it is left out and starts empty.
    again = pickle.loads(pickle.dumps(spec))
    assert again == tg.ToolSpec(name="lookup", json_schema={"type": "object"}, refs={})
    assert len(again._compiled) == 0
    assert tg.Guard().declare("lookup", again).name == "lookup"
