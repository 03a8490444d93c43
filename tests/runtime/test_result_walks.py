"""The walks and indexes behind the call pipeline's fast stages, against what they replace.

The record stage's key finder (``calls/record.py``: a flat record or a list of flat records
looked up directly) against the ``_find_key`` generator, the leaf walker against
``_leaves``, the seen-text index (the information check) against a scan, and the tool-name
suggestions against difflib.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolguard as tg
from toolguard.runtime.tools.places import _find_key, find_key_into
from toolguard.runtime.tools.suggest import ToolNames
from toolguard.runtime.trajectories.leaves import _leaves, add_leaves
from toolguard.runtime.trajectories.seen import SeenTexts

texts_strategy = st.lists(
    st.text(alphabet="ab\x00c- ", max_size=12) | st.sampled_from(["id-1", "abc", "a b c"]),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(
    texts=texts_strategy,
    needles=st.lists(st.text(alphabet="ab\x00c- ", max_size=6), max_size=10),
    ratio=st.sampled_from([0, 0.5, 100]),
    block=st.sampled_from([1, 5, 64]),
)
def test_seen_text_index_answers_as_the_scan(
    texts: list[str], needles: list[str], ratio: float, block: int
) -> None:
    index = SeenTexts(seal_ratio=ratio, block_chars=block)
    seen: list[str] = []
    for i, text in enumerate(texts):
        index.add(text)
        seen.append(text)
        for needle in needles[i % 3 :: 3]:
            assert index.contains(needle) == any(needle in t for t in seen), (needle, seen)
    for needle in needles:
        assert index.contains(needle) == any(needle in t for t in seen), (needle, seen)


def test_seen_text_index_finds_old_text_after_sealing() -> None:
    index = SeenTexts(seal_ratio=0, block_chars=100)
    index.add("please pay the rent for March")
    for i in range(5_000):
        index.add(f"Transferred 12.50 from acc-7; receipt r-{i} issued.")
        assert index.contains(f"receipt r-{i}")
    assert index.contains("rent for March")
    assert index.contains("r-4999 iss")
    assert not index.contains("r-5000")
    assert not index.contains("rent for April")
    assert index.contains("") and index.contains("7") and not index.contains("Z")
    assert index._blocks, "the history was sealed into indexed blocks"


@dataclasses.dataclass
class Leaf:
    id: str
    n: int


class Model(pydantic.BaseModel):
    id: str
    tags: list[str] = []


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, width=16)
    | st.sampled_from(["id", "x", "id-1", ""])
    | st.binary(max_size=2),
    lambda children: (
        st.lists(children, max_size=3)
        | st.lists(children, max_size=3).map(tuple)
        | st.frozensets(st.sampled_from(["a", "id", 1]), max_size=2)
        | st.dictionaries(st.sampled_from(["id", "x", "items", 1, (1, 2)]), children, max_size=3)
        | st.builds(Leaf, st.sampled_from(["id", "q"]), st.integers(0, 2))
        | st.builds(Model, id=st.sampled_from(["id", "m"]))
    ),
    max_leaves=25,
)


def _nest(value: Any, depth: int) -> Any:
    """``value`` under ``depth`` levels, each holding it in a list under "id" beside the next
    level under "x": the walks meet it at every depth from 2 to ``depth`` + 1, so their cut-off
    (past depth 20) falls at each place inside it, in a value whose size grows with ``depth``
    linearly (a level holding the one below under both keys doubled it)."""
    nested = value
    for _ in range(depth):
        nested = {"id": [value], "x": nested}
    return nested


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(value=json_like, depth=st.sampled_from([0, 0, 18, 21]))
def test_key_finder_and_leaf_walker_agree_with_the_generators(value: Any, depth: int) -> None:
    value = _nest(value, depth)
    for key in ("id", "x", "items"):
        found: list[Any] = []
        find_key_into(value, key, found)
        assert found == list(_find_key(value, key, 0))
    leaves: list[str] = []
    add_leaves(value, leaves.append)
    assert leaves == list(_leaves(value))


def _bindings_after(result: Any) -> Any:
    """What the guard bound and saw after one call of a tool returning ``result``."""
    guard = tg.Guard()
    box = [result]

    @guard.tool(produces={"id": "k", "x": "k2"}, grounded=["n"])
    def f(n: str) -> Any:
        return box[0]

    with tg.trajectory(user_input="0") as traj:
        f(n="0")
        return (
            {k: list(d) for k, d in traj._bindings.by_kind.items() if d},
            sorted(map(repr, traj._seen)),
        )


def _expected(result: Any) -> Any:
    """The same, from the generators the fast finder replaces (``_find_key``, ``_leaves``):
    None and unhashable values are never bound; a finder that fails binds what it found
    before (and the walk then stops: the leaves are not observed)."""
    bound: dict[str, list[Any]] = {}
    seen = {"0"}
    try:
        for kind, key in (("k", "id"), ("k2", "x")):
            values: dict[Any, None] = {}
            try:
                for value in _find_key(result, key, 0):
                    if value is None:
                        continue
                    try:
                        hash(value)
                    except TypeError:
                        continue
                    values[value] = None
            finally:
                if values:
                    bound[kind] = list(values)
        seen.update(_leaves(result))
    except Exception:
        pass
    return bound, sorted(map(repr, seen))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(value=json_like)
def test_produces_and_observe_find_what_the_generators_find(value: Any) -> None:
    """The record stage's result walk (a flat dict short-cut, the top level inline) binds and
    observes what the generic walk finds, whatever the result holds."""
    logging.getLogger("toolguard").setLevel(logging.CRITICAL)
    try:
        assert _bindings_after(value) == _expected(value)
    finally:
        logging.getLogger("toolguard").setLevel(logging.NOTSET)


_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from(["id", "x", "id-1", "id-2", ""])
    | st.binary(max_size=2)
)
# A search's answer: a list of records, most of them flat (the compiled path's short-cut),
# some holding a container or a non-str key (walked whole), some not dicts at all.
records = st.lists(
    st.dictionaries(st.sampled_from(["id", "x", "name"]), _leaf, max_size=3)
    | st.dictionaries(
        st.sampled_from(["id", "x", 1]),
        _leaf
        | st.lists(_leaf, max_size=2)
        | st.dictionaries(st.sampled_from(["id", "x"]), _leaf, max_size=2),
        max_size=3,
    )
    | _leaf
    | st.lists(st.dictionaries(st.sampled_from(["id", "x"]), _leaf, max_size=2), max_size=2),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(value=records)
def test_produces_over_a_list_of_records_finds_what_the_generators_find(value: Any) -> None:
    logging.getLogger("toolguard").setLevel(logging.CRITICAL)
    try:
        assert _bindings_after(value) == _expected(value)
    finally:
        logging.getLogger("toolguard").setLevel(logging.NOTSET)


def test_invalidating_one_produced_value_leaves_its_siblings_live() -> None:
    """The values one call produces share one binding (Trajectory._produce_all): invalidating
    one of them must not reach the others."""
    guard = tg.Guard()

    @guard.tool(produces={"id": "contact"})
    def search() -> list[dict[str, str]]:
        return [{"id": "c-1"}, {"id": "c-2"}, {"id": "c-3"}]

    @guard.tool(refs={"contact": "contact"}, invalidates={"contact": "contact"})
    def remove(contact: str) -> str:
        return "removed"

    with tg.trajectory() as traj:
        search()
        remove(contact="c-2")
        assert traj.live_values("contact") == ["c-1", "c-3"]
        removed = traj.lookup("contact", "c-2")
        assert removed is not None and not removed.live
        assert removed.invalidated_by == "remove at step 2" and removed.step == 1
        with pytest.raises(tg.ToolCallRejected):
            remove(contact="c-2")
        remove(contact="c-3")
        assert traj.live_values("contact") == ["c-1"]


def test_suggestions_among_few_tools_are_difflibs() -> None:
    names = ToolNames()
    pool = ["remove_contact", "search_contacts", "send_message", "transfer", "get_weather"]
    for n in pool:
        names.add(n)
    for word in ("remove_contacts", "trasnfer", "weather", "zzz", "sendmessage"):
        assert names.close(word) == difflib.get_close_matches(word, pool, n=3)


def test_suggestions_among_many_tools_find_typos_in_bounded_candidates() -> None:
    names = ToolNames()
    for i in range(10_000):
        names.add(f"tool_{i:05d}")
    for n in ("transfer", "get_weather", "get_weather_forecast", "search_contacts"):
        names.add(n)
    every = list(names._names)
    for word in ("trasnfer", "rtansfer", "get_weather_now", "search_contact"):
        # The same answer as difflib over all 10,004 names, from a few dozen candidates.
        assert names.close(word) == difflib.get_close_matches(word, every, n=3), word
        assert len(names._candidates(word)) <= 64
    # Hundreds of names tie with "tool_0042x" (one edit each): among many, three of them.
    assert len(names.close("tool_0042x")) == 3
    assert names.close("trasnfer")[0] == "transfer"
    assert names.close("completely_different_name_here") == []
