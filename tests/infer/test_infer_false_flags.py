"""The rules that keep an inferred contract from flagging legal calls (chosen on BFCL's --dev
split): no ``refs`` on a quantity the user types, ``grounded`` evidence from first uses only,
no ``grounded`` on the name of what a call creates. Each test shows the rule with its switch
off too, so it proves the switch is what removes it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from runs import flagged, run, write

from toolguard.infer import CommonRule, propose, render, trace_runs
from toolguard.replay.sources import read_runs


def _contract(path: str, **switches: bool) -> dict[str, Any]:
    tools: dict[str, Any] = tomllib.loads(_text(path, **switches)).get("tools", {})
    return tools


def _text(path: str, **switches: bool) -> str:
    flow = trace_runs(read_runs("openai", [path]), rule=CommonRule())
    rules = propose(flow, min_support=5, min_share=0.95, min_distinct=5, **switches)
    return render(rules, flow, min_support=5, min_share=0.95, min_distinct=5)


def _orders(typed: bool) -> list[dict[str, Any]]:
    """Six orders at a price a quote gave; with ``typed``, a seventh whose user typed it."""
    rows = [
        run(
            f"r{i}",
            f"buy SYM{i}",
            ("get_quote", {"symbol": f"SYM{i}"}, {"price": 120.25 + i}),
            ("place_order", {"symbol": f"SYM{i}", "price": 120.25 + i}, {"order_id": "o1"}),
        )
        for i in range(6)
    ]
    if typed:
        rows.append(
            run("typed", "buy SYM9 at 150", ("place_order", {"symbol": "SYM9", "price": 150.0}, {}))
        )
    return rows


def test_no_refs_on_a_quantity_the_user_types(tmp_path: Path) -> None:
    path = write(str(tmp_path), _orders(typed=True))
    before = _contract(path, typed_quantities=False)
    assert before["place_order"]["refs"]["price"] == "price"
    assert "refs" not in _contract(path).get("place_order", {})


def test_a_quantity_only_results_give_keeps_its_refs(tmp_path: Path) -> None:
    # A distance computed by one tool and passed to the next is a value flowing, not typed.
    path = write(str(tmp_path), _orders(typed=False))
    assert _contract(path)["place_order"]["refs"]["price"] == "price"


def test_a_typed_price_with_cents_is_not_flagged(tmp_path: Path) -> None:
    folder = tmp_path / "held"
    folder.mkdir()
    held = write(
        str(folder),
        [run("h", "buy SYM8 at 25.50", ("place_order", {"symbol": "SYM8", "price": 25.5}, {}))],
    )
    train = write(str(tmp_path), _orders(typed=True))
    assert flagged(held, _text(train, typed_quantities=False)) == [("h", 1, "dependency.price")]
    assert flagged(held, _text(train)) == []


def _files(composed: bool = False) -> list[dict[str, Any]]:
    """Each run makes a file the user named and writes it; with ``composed`` the agent built
    the name itself (the same name with another extension), which no message holds."""
    rows = []
    for i in range(6):
        name = f"notes{i}.md" if composed else f"notes{i}.txt"
        rows.append(
            run(
                f"r{i}",
                f"create 'notes{i}.txt' and write hello in it",
                ("touch", {"file_name": name}, {}),
                ("echo", {"file_name": name, "content": "hello"}, {}),
            )
        )
    return rows


def test_grounded_evidence_is_a_first_use(tmp_path: Path) -> None:
    # echo names the file touch made: reusing its own value is no evidence of copying the user.
    path = write(str(tmp_path), _files())
    assert _contract(path, first_uses=False)["echo"]["grounded"] == ["file_name"]
    assert "echo" not in _contract(path)


def test_no_grounded_on_the_name_of_what_a_call_creates(tmp_path: Path) -> None:
    path = write(str(tmp_path), _files())
    assert _contract(path, creator_names=False)["touch"]["grounded"] == ["file_name"]
    assert "touch" not in _contract(path)


def test_a_name_nothing_reuses_may_still_be_grounded(tmp_path: Path) -> None:
    # A title the user gave and no later call names: copied, not the name of a thing made.
    rows = [
        run(
            f"r{i}",
            f"open a ticket 'Printer {i} broken'",
            ("create_ticket", {"title": f"Printer {i} broken"}, {"id": i}),
        )
        for i in range(6)
    ]
    path = write(str(tmp_path), rows)
    assert _contract(path)["create_ticket"]["grounded"] == ["title"]


def test_a_composed_file_name_is_not_flagged(tmp_path: Path) -> None:
    folder = tmp_path / "held"
    folder.mkdir()
    held = write(str(folder), _files(composed=True)[:1])
    train = write(str(tmp_path), _files())
    before = _text(train, first_uses=False, creator_names=False)
    assert flagged(held, before) == [
        ("r0", 1, "information.file_name"),
        ("r0", 2, "information.file_name"),
    ]
    assert flagged(held, _text(train)) == []
