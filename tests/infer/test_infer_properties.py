"""Properties of `toolguard infer` over generated runs: the same input (in any order) gives
the same bytes, and a contract inferred from runs that never failed flags none of them."""

from __future__ import annotations

import random
import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from runs import flagged, infer_text, run, write

_ID = st.text(alphabet="abcdef0123456789", min_size=4, max_size=8)


@st.composite
def _run(draw: st.DrawFn, index: int) -> dict[str, Any]:
    """A run that never failed: searches, lookups of an id found (or, sometimes, one from
    nowhere), removals after which a removed id is used only once a search found it again
    (searches mostly stop finding it), files named by the user opened and read by handle,
    and small numbers."""
    name = draw(st.sampled_from(["Ann", "Bob", "Carla", "Dmitri"]))
    path = draw(st.sampled_from(["notes.txt", "todo.md", "a/b.csv"]))
    passport = "P" + draw(st.text(alphabet="0123456789", min_size=5, max_size=6))
    calls: list[tuple[str, dict[str, Any], Any]] = []
    ids: list[str] = []  # found and not removed since
    removed: list[str] = []
    handles: list[str] = []
    for _ in range(draw(st.integers(0, 8))):
        op = draw(st.sampled_from(["search", "get", "remove", "open", "read", "count", "verify"]))
        if op == "search":
            found = draw(st.lists(_ID, min_size=0, max_size=3))
            if removed and draw(st.integers(0, 3)) == 0:
                found.append(removed.pop())  # found again: usable again
            ids.extend(f for f in found if f not in ids)
            removed = [r for r in removed if r not in found]
            calls.append(("search", {"name": name}, {"items": [{"id": i} for i in found]}))
        elif op == "get":
            invented = not ids or draw(st.integers(0, 9)) == 0
            item = draw(_ID) if invented else draw(st.sampled_from(ids))
            if invented and item in removed:
                continue  # never a removed id: the environment would refuse it
            calls.append(("get", {"item_id": item}, {"title": f"T{item}"}))
        elif op == "remove" and ids:
            item = draw(st.sampled_from(ids))
            ids.remove(item)
            removed.append(item)
            calls.append(("remove", {"item_id": item}, {"ok": True}))
        elif op == "open":
            handle = "h-" + draw(_ID)
            handles.append(handle)
            calls.append(("open", {"path": path}, {"handle": handle}))
        elif op == "read" and handles:
            calls.append(("read", {"handle": draw(st.sampled_from(handles))}, {"text": "..."}))
        elif op == "verify":
            # The passport the user gave, or one only a lookup's result shows.
            shown = draw(st.booleans())
            number = passport
            if shown:
                number = "Q" + draw(st.text(alphabet="0123456789", min_size=5, max_size=6))
                calls.append(("lookup", {"who": name}, {"passport": number}))
            calls.append(("verify", {"passport_number": number}, {"ok": True}))
        else:
            calls.append(("count", {"n": draw(st.integers(0, 500))}, {"count": 1}))
    return run(f"run{index:03d}", f"I am {name} ({passport}); open {path}", *calls)


@st.composite
def _runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 25))
    return [draw(_run(i)) for i in range(n)]


@settings(max_examples=40, deadline=None)
@given(rows=_runs(), seed=st.integers(0, 2**16), support=st.integers(1, 6))
def test_output_is_deterministic_and_order_free(rows: list[Any], seed: int, support: int) -> None:
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    with tempfile.TemporaryDirectory() as folder:
        a = infer_text(write(folder, rows, "a.jsonl"), min_support=support)
        again = infer_text(write(folder, rows, "a.jsonl"), min_support=support)
        b = infer_text(write(folder, shuffled, "b.jsonl"), min_support=support)
    assert a == again == b


@settings(max_examples=40, deadline=None)
@given(rows=_runs(), support=st.integers(1, 3))
def test_inferred_from_runs_that_never_failed_flags_none_of_them(
    rows: list[Any], support: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(folder, rows)
        text = infer_text(path, min_support=support, min_share=1.0)
        assert flagged(path, text) == []


@settings(max_examples=30, deadline=None)
@given(rows=_runs())
def test_at_a_lower_share_only_counterexample_runs_are_flagged(rows: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(folder, rows)
        text = infer_text(path, min_support=1, min_share=0.5)
        listed = {
            run_id.strip()
            for line in text.splitlines()
            if "counterexamples:" in line
            for run_id in line.split("counterexamples:")[1].split("(+")[0].split(",")
        }
        partial = "more)" in text  # more counterexamples than the three listed
        for run_id, _, _ in flagged(path, text):
            assert partial or run_id in listed
