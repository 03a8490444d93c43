"""The undo log is exact (issue: "a dry run leaves the state exactly as it was").

After a rejected call the state graph is the very same as before: the same objects at the
same places (``is``), with the same types, values, dict order, sharing and cycles. After an
accepted call it equals a plain run of the same call on a deep copy. Random graphs and random
programs (tests/runtime/state_graphs.py) end in the three ways a call ends: it raises, it returns
``{"error": ...}``, it is accepted; both on the journal alone and through the guard.
"""

from __future__ import annotations

from typing import Annotated, Any

from hypothesis import given, settings
from hypothesis import strategies as st
from state_graphs import build, nodes, run, shape

import toolguard as tg
from toolguard.runtime.forks.undolog import Journal

PROGRAMS = st.lists(
    st.tuples(st.integers(0, 7), st.integers(0, 30), st.integers(-3, 3)), max_size=10
)
ENDINGS = st.sampled_from(["raise", "error", "accept"])


def assert_same_graph(root: Any, before_shape: list[Any], before_nodes: list[Any]) -> None:
    assert shape(root) == before_shape
    after = nodes(root)
    assert len(after) == len(before_nodes)
    for i, (now, then) in enumerate(zip(after, before_nodes, strict=True)):
        assert now is then, f"node {i}: a {type(then).__name__} was replaced by a copy"
        assert type(now) is type(then)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10_000), program=PROGRAMS)
def test_a_rollback_gives_back_the_same_graph_and_keep_equals_a_plain_run(
    seed: int, program: list[tuple[int, int, int]]
) -> None:
    root = build(seed)
    before_shape, before_nodes = shape(root), nodes(root)
    plain = build(seed)  # not a deep copy: it duplicates a tuple on a cycle
    run(plain, program)
    journal = Journal()
    journal.track(root)
    run(root, program)
    journal.rollback()
    assert_same_graph(root, before_shape, before_nodes)

    journal = Journal()
    journal.track(root)
    run(root, program)
    journal.keep()
    assert shape(root) == shape(plain)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), program=PROGRAMS, ending=ENDINGS)
def test_through_the_guard_a_rejected_call_leaves_the_graph_and_an_accepted_one_stands(
    seed: int, program: list[tuple[int, int, int]], ending: str
) -> None:
    root = build(seed)
    before_shape, before_nodes = shape(root), nodes(root)
    plain = build(seed)  # not a deep copy: it duplicates a tuple on a cycle
    run(plain, program)
    guard = tg.Guard(
        state=root,
        dry_run=tg.UndoLogFork(),
        error_result=lambda r: isinstance(r, dict) and "error" in r,
    )

    @guard.tool
    def change(how: str, state: Annotated[Any, tg.State]) -> Any:
        run(state, program)
        if how == "raise":
            raise ValueError("the environment says no")
        return {"error": "no"} if how == "error" else "done"

    out = guard.call("change", {"how": ending})
    if ending == "accept":
        assert out == "done"
        assert shape(root) == shape(plain)
    else:
        assert isinstance(out, tg.Rejection) and out.check == "state.dry_run"
        assert_same_graph(root, before_shape, before_nodes)
