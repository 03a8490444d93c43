"""The undo log behind ``tg.UndoLogFork`` (toolguard/runtime/forks/undolog.py), on its own.

A call runs on the real objects inside a journal; rolling back must give back the state as it
was (values and identities), keeping must leave exactly what the call did, and either way the
objects must wear their own classes again. The property test drives random programs of
writes over a random object graph and compares against a deep copy taken beforehand.
"""

from __future__ import annotations

import array
import collections
import copy
import datetime
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import toolguard as tg
from toolguard.runtime.forks.undolog import Journal


class Node:
    label = "class default"  # an instance value may hide it: the log must not unhide it

    def __init__(self, name: str, children: list[Node] | None = None) -> None:
        self.name = name
        self.children = children or []
        self.tags: set[str] = set()
        self.meta: dict[str, Any] = {"hits": 0, "history": []}
        self.parent: Node | None = None


class Store:
    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {"a": {"qty": 1, "log": [1]}}
        self.queue = collections.deque([1, 2])
        self.rng = random.Random(7)
        self.count = 0
        self.root = Node("root", [Node("x"), Node("y")])
        self.root.label = "mine"
        for child in self.root.children:
            child.parent = self.root


def snapshot(obj: Any) -> Any:
    """Everything observable, as plain data (random state included)."""
    seen: dict[int, int] = {}

    def walk(x: Any) -> Any:
        if isinstance(x, random.Random):
            return ("rng", x.getstate())
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list | tuple | collections.deque):
            return [walk(v) for v in x]
        if isinstance(x, set):
            return sorted(x)
        if hasattr(x, "__dict__"):
            if id(x) in seen:
                return ("ref", seen[id(x)])
            seen[id(x)] = len(seen)
            return (type(x).__name__, {k: walk(v) for k, v in vars(x).items()})
        return x

    return walk(obj)


def mutate(store: Store) -> str:
    store.count += 1
    store.items["a"]["qty"] -= 5
    store.items["a"]["log"].append(2)
    store.items["b"] = {"qty": 9, "log": []}
    store.queue.append(3)
    store.rng.random()
    store.root.children[0].tags.add("t")
    store.root.children[1].meta["history"].append("moved")
    store.root.children.pop()
    store.root.label = "changed"
    store.root.extra = "new"  # type: ignore[attr-defined]
    del store.root.children[0].parent
    return "done"


def test_rollback_restores_values_identities_and_classes() -> None:
    store = Store()
    before = snapshot(store)
    ids = (id(store.items), id(store.items["a"]["log"]), id(store.root.children))
    journal = Journal()
    assert journal.track(store)
    assert mutate(store) == "done"
    assert type(store) is not Store and isinstance(store, Store)  # the stand-in, meanwhile
    journal.rollback()
    assert snapshot(store) == before
    assert (id(store.items), id(store.items["a"]["log"]), id(store.root.children)) == ids
    assert type(store) is Store and type(store.root) is Node
    assert store.rng.random() == random.Random(7).random()  # the draw was undone


def test_keep_leaves_exactly_what_the_call_did() -> None:
    expected, store = Store(), Store()
    mutate(expected)
    journal = Journal()
    journal.track(store)
    mutate(store)
    journal.keep()
    assert snapshot(store) == snapshot(expected)
    assert list(vars(store.root)) == list(vars(expected.root))  # attribute order kept
    assert type(store) is Store and type(store.root.children[0]) is Node


def test_an_instance_value_that_hides_a_class_attribute_stays_visible() -> None:
    store = Store()
    journal = Journal()
    journal.track(store)
    assert store.root.label == "mine"
    assert store.root.children[0].label == "class default"
    journal.rollback()


def test_vars_is_complete_during_the_call_and_deletes_are_undone() -> None:
    node = Node("n")
    journal = Journal()
    journal.track(node)
    del node.name
    assert "name" not in vars(node) and set(vars(node)) == {"children", "tags", "meta", "parent"}
    with pytest.raises(AttributeError):
        _ = node.name
    with pytest.raises(AttributeError):
        del node.name
    journal.rollback()
    assert node.name == "n"


def test_a_deleted_then_rewritten_attribute_is_kept() -> None:
    node = Node("n")
    journal = Journal()
    journal.track(node)
    del node.name
    node.name = "again"
    journal.keep()
    assert vars(node)["name"] == "again"


class Account(BaseModel):
    owner: str
    balance: int
    history: list[int] = []


def test_a_pydantic_model_is_entered_eagerly_and_restored() -> None:
    account = Account(owner="ann", balance=10, history=[1])
    holder = Node("h")
    holder.meta["account"] = account
    journal = Journal()
    journal.track(holder)
    holder.meta["account"].balance -= 4
    holder.meta["account"].history.append(2)
    assert holder.meta["account"].model_dump() == {"owner": "ann", "balance": 6, "history": [1, 2]}
    journal.rollback()
    assert account.model_dump() == {"owner": "ann", "balance": 10, "history": [1]}
    assert type(account) is Account


class Slotted:
    __slots__ = ("unset", "value")

    def __init__(self) -> None:
        self.value = [1]


def test_an_object_of_slots_is_recorded_and_its_unset_slots_stay_unset() -> None:
    holder = Node("h")
    slotted = Slotted()
    items = slotted.value
    holder.meta["slotted"] = slotted
    journal = Journal()
    journal.track(holder)
    holder.meta["slotted"].value.append(2)
    holder.meta["slotted"].value = ["other"]
    holder.meta["slotted"].unset = "now set"
    journal.rollback()
    assert slotted.value is items and items == [1]
    assert not hasattr(slotted, "unset")


def test_what_cannot_be_journaled_is_a_fork_error_that_names_it() -> None:
    holder = Node("h")
    holder.meta["samples"] = array.array("i", [1, 2])  # neither a __dict__ nor slots
    journal = Journal()
    journal.track(holder)
    with pytest.raises(tg.ForkError, match=r"array.*Node\.meta.*DeepCopyFork"):
        _ = holder.meta
    journal.rollback()
    assert type(holder) is Node


def test_an_object_is_in_one_transaction_at_a_time() -> None:
    node = Node("n")
    first, second = Journal(), Journal()
    first.track(node)
    with pytest.raises(tg.ForkError, match="one at a time"):
        second.track(node)
    first.rollback()
    assert second.track(node)
    second.keep()


def test_nothing_to_track_is_refused_by_the_strategy() -> None:
    with pytest.raises(tg.ForkError, match="nothing to track"):
        tg.UndoLogFork().fork(None)


# -- property: random programs on a random graph ----------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["set", "del", "append", "pop", "dict_set", "dict_del", "add", "swap", "rng", "new"]
        ),
        st.integers(0, 5),
        st.integers(-3, 3),
    ),
    max_size=12,
)


def build(seed: int) -> Node:
    rnd = random.Random(seed)
    nodes = [Node(f"n{i}") for i in range(4)]
    for node in nodes:
        node.children = rnd.sample(nodes, rnd.randint(0, 3))  # shared and cyclic on purpose
        node.meta["hits"] = rnd.randint(0, 9)
        node.meta["nested"] = {"xs": [rnd.randint(0, 9) for _ in range(3)]}
        node.rng = random.Random(seed)  # type: ignore[attr-defined]
    return nodes[0]


def run(root: Node, ops: list[tuple[str, int, int]]) -> None:
    reachable = [root, *root.children]
    for op, i, v in ops:
        node = reachable[i % len(reachable)]
        if op == "set":
            node.name = f"{node.name}{v}"
        elif op == "del" and "parent" in vars(node):
            del node.parent
        elif op == "append":
            node.meta.setdefault("nested", {"xs": []})["xs"].append(v)
        elif op == "pop" and node.children:
            reachable.append(node.children.pop())
        elif op == "dict_set":
            node.meta[f"k{v}"] = [v]
        elif op == "dict_del":
            node.meta.pop("hits", None)
        elif op == "add":
            node.tags.add(str(v))
        elif op == "swap":
            node.children = list(reversed(node.children))
        elif op == "rng" and hasattr(node, "rng"):  # a node made by "new" has none
            node.meta["draw"] = node.rng.random()  # type: ignore[attr-defined]
        elif op == "new":
            node.children.append(Node(f"new{v}"))


def in_journal(root: Any, program: Callable[[Any], None], *, keep: bool) -> None:
    """Run ``program`` on ``root`` inside a journal, then keep or roll back."""
    journal = Journal()
    journal.track(root)
    program(root)
    journal.keep() if keep else journal.rollback()


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 1000), ops=OPS)
def test_rollback_equals_the_state_before_and_keep_equals_a_plain_run(
    seed: int, ops: list[tuple[str, int, int]]
) -> None:
    root = build(seed)
    before = snapshot(root)
    plain = copy.deepcopy(root)
    run(plain, ops)
    in_journal(root, lambda r: run(r, ops), keep=False)
    assert snapshot(root) == before
    in_journal(root, lambda r: run(r, ops), keep=True)
    assert snapshot(root) == snapshot(plain)


# -- plain data, restored in place ------------------------------------------------------------

DATA_OPS = st.lists(
    st.tuples(
        st.sampled_from(["set", "del", "append", "insert", "replace", "add", "clear", "nest"]),
        st.sampled_from(["a", "b", "p", "q", "new"]),
        st.integers(-3, 3),
    ),
    max_size=10,
)


def plain_state() -> dict[str, Any]:
    shared = [0, {"deep": [1]}]
    return {"a": {"x": [1, 2], "n": 1}, "b": [{"y": 1}, {"y": 2}], "p": shared, "q": shared,
            "s": {1, 2}}  # fmt: skip


def run_data(state: dict[str, Any], ops: list[tuple[str, str, int]]) -> None:
    for op, key, v in ops:
        target = state.get(key)
        if op == "set":
            state[key] = v
        elif op == "del":
            state.pop(key, None)
        elif op == "append" and isinstance(target, list):
            target.append(v)
        elif op == "insert" and isinstance(target, list):
            target.insert(0, {"inserted": v})
        elif op == "replace":
            state[key] = {"replaced": [v]}
        elif op == "add":
            state["s"].add(v)
        elif op == "clear" and isinstance(target, dict | list):
            target.clear()
        elif (
            op == "nest"
            and isinstance(target, list)
            and len(target) > 1
            and isinstance(target[1], dict)
        ):
            target[1].setdefault("deep", []).append(v)  # reached through the shared list


@settings(max_examples=200, deadline=None)
@given(ops=DATA_OPS)
def test_plain_data_is_restored_with_values_sharing_and_untouched_identities(
    ops: list[tuple[str, str, int]],
) -> None:
    state = plain_state()
    before = copy.deepcopy(state)
    ids = {k: id(state[k]) for k in ("a", "b", "p")}
    journal = Journal()
    journal.track(state)
    run_data(state, ops)
    journal.rollback()
    assert state == before
    assert state["p"] is state["q"]  # shared before, shared after
    rebound = {key for op, key, _ in ops if op in ("set", "del", "replace")}
    for key in ("a", "b", "p"):
        if key not in rebound:
            assert id(state[key]) == ids[key]  # not replaced by the call: the same object


def test_objects_inside_plain_data_are_entered_and_restored() -> None:
    holder = {"rows": [{"id": 1}], "node": Node("n")}
    journal = Journal()
    journal.track(holder)
    holder["node"].name = "changed"
    holder["rows"][0]["id"] = 2
    journal.rollback()
    assert holder["node"].name == "n" and type(holder["node"]) is Node
    assert holder["rows"] == [{"id": 1}]


# -- objects of plain values, recorded by a copy of their dict --------------------------------


class Leaf:
    """A file-like object: only plain values, so the log copies its dict instead of entering
    it (many of them in one container are recorded in one pass)."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.stamp = datetime.datetime(2026, 1, 1)


class Folder:
    def __init__(self, name: str, leaves: int) -> None:
        self.name = name
        self.entries: dict[str, Leaf | Folder] = {f"f{i}": Leaf(f"f{i}", i) for i in range(leaves)}


LEAF_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["grow", "rename", "forget", "stamp", "replace", "remove", "add", "move", "listify"]
        ),
        st.integers(0, 40),
        st.integers(-3, 3),
    ),
    max_size=12,
)


def tree(leaves: int) -> Folder:
    root = Folder("root", leaves)
    sub = Folder("sub", leaves // 2)
    root.entries["sub"] = sub
    sub.entries["shared"] = root.entries.get("f0", Leaf("lone", 0))  # reached by two paths
    return root


def run_leaves(root: Folder, ops: list[tuple[str, int, int]]) -> None:
    folders = [root, root.entries["sub"]]
    for op, i, v in ops:
        folder = folders[i % 2]
        assert isinstance(folder, Folder)
        names = sorted(k for k, e in folder.entries.items() if isinstance(e, Leaf))
        leaf = folder.entries[names[i % len(names)]] if names else None
        if op == "grow" and isinstance(leaf, Leaf) and isinstance(leaf.size, int):
            leaf.size += v
        elif op == "rename" and isinstance(leaf, Leaf):
            leaf.name = f"{leaf.name}{v}"
        elif op == "forget" and isinstance(leaf, Leaf) and "stamp" in vars(leaf):
            del leaf.stamp
        elif op == "stamp" and isinstance(leaf, Leaf):
            leaf.extra = v  # type: ignore[attr-defined]
        elif op == "replace" and names:
            folder.entries[names[0]] = Leaf("replaced", v)
        elif op == "remove" and names:
            del folder.entries[names[-1]]
        elif op == "add":
            folder.entries[f"new{v}"] = Leaf(f"new{v}", v)
        elif op == "move" and isinstance(leaf, Leaf):
            folders[(i + 1) % 2].entries[f"moved{v}"] = leaf  # type: ignore[union-attr]
        elif op == "listify" and isinstance(leaf, Leaf) and isinstance(leaf.size, int):
            leaf.size = [leaf.size]  # type: ignore[assignment]
            leaf.size.append(v)  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(leaves=st.sampled_from([0, 1, 3, 12, 30]), ops=LEAF_OPS)
def test_objects_of_plain_values_are_restored_and_kept(
    leaves: int, ops: list[tuple[str, int, int]]
) -> None:
    root = tree(leaves)
    before = snapshot(root)
    members = {k: id(e) for k, e in root.entries.items()}
    plain = copy.deepcopy(root)
    run_leaves(plain, ops)
    in_journal(root, lambda r: run_leaves(r, ops), keep=False)
    assert snapshot(root) == before
    assert {k: id(e) for k, e in root.entries.items()} == members  # the same objects
    in_journal(root, lambda r: run_leaves(r, ops), keep=True)
    assert snapshot(root) == snapshot(plain)
    assert all(type(e) in (Leaf, Folder) for e in root.entries.values())
