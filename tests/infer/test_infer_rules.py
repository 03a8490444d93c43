"""Each rule of `toolguard infer` on small hand-written runs."""

from __future__ import annotations

import tomllib
from pathlib import Path

from runs import flagged, infer_text, run, write

from toolguard.infer import CommonRule, propose, trace_runs
from toolguard.replay.sources import read_runs


def _contacts(n: int, *, bad: int = 0, error_at: int | None = None) -> list[dict]:
    rows = []
    for i in range(n):
        cid = f"id_{8000 + i}"
        used = f"id_made_up_{i}" if i < bad else cid
        rows.append(
            run(
                f"r{i:02d}",
                f"remove the contact named Person{i}",
                ("search_contact", {"name": f"Person{i}"}, {"contacts": [{"id": cid}]}),
                ("remove_contact", {"contact_id": used}, {"ok": True}),
                error_at=error_at,
            )
        )
    return rows


def test_refs_and_produces_named_after_the_producer_path(tmp_path: Path) -> None:
    text = infer_text(write(str(tmp_path), _contacts(6)))
    data = tomllib.loads(text)
    assert data["mode"] == "log"
    assert data["tools"]["remove_contact"]["refs"] == {"contact_id": "contact_id"}
    assert data["tools"]["search_contact"]["produces"] == {"contacts[].id": "contact_id"}
    assert "support 6 trajectories and 6 distinct values, share 1.0000 (6/6 values)" in text


def test_below_min_support_no_rule(tmp_path: Path) -> None:
    data = tomllib.loads(infer_text(write(str(tmp_path), _contacts(4))))
    assert "refs" not in data.get("tools", {}).get("remove_contact", {})


def test_share_below_min_share_no_rule_and_counterexamples_listed(tmp_path: Path) -> None:
    path = write(str(tmp_path), _contacts(20, bad=2))  # 18/20 = 0.90 < 0.95
    assert "refs" not in tomllib.loads(infer_text(path)).get("tools", {}).get("remove_contact", {})
    text = infer_text(path, min_share=0.9)
    assert tomllib.loads(text)["tools"]["remove_contact"]["refs"] == {"contact_id": "contact_id"}
    assert "share 0.9000 (18/20 values); counterexamples: r00, r01" in text


def test_only_accepted_calls_count(tmp_path: Path) -> None:
    # The remove call was rejected every time: no evidence for its argument.
    text = infer_text(write(str(tmp_path), _contacts(6, error_at=1)))
    assert "refs" not in tomllib.loads(text).get("tools", {}).get("remove_contact", {})


def test_two_producers_feeding_one_argument_are_one_kind(tmp_path: Path) -> None:
    rows = []
    for i in range(10):
        cid = f"id_{9000 + i}"
        first = (
            ("search_contact", {"name": f"P{i}"}, {"contacts": [{"id": cid}]})
            if i % 2
            else ("list_recent", {"limit": 5}, {"recent": [{"contact_id": cid}]})
        )
        rows.append(
            run(f"r{i}", f"remove P{i}", first, ("remove_contact", {"contact_id": cid}, {}))
        )
    data = tomllib.loads(infer_text(write(str(tmp_path), rows)))
    kind = data["tools"]["remove_contact"]["refs"]["contact_id"]
    assert data["tools"]["search_contact"]["produces"] == {"contacts[].id": kind}
    assert data["tools"]["list_recent"]["produces"] == {"recent[].contact_id": kind}


def test_grounded_from_the_users_messages(tmp_path: Path) -> None:
    rows = [
        run(f"r{i}", f"book a flight to City{i}", ("book", {"city": f"City{i}"}, {"ok": 1}))
        for i in range(6)
    ]
    text = infer_text(write(str(tmp_path), rows))
    assert tomllib.loads(text)["tools"]["book"]["grounded"] == ["city"]
    assert "# grounded city: support 6 trajectories" in text


def test_common_values_are_no_evidence(tmp_path: Path) -> None:
    # "ok" is shorter than 3 characters once counted: no grounded rule from it.
    rows = [run(f"r{i}", "say ok", ("reply", {"word": "ok"}, {})) for i in range(8)]
    assert "grounded" not in infer_text(write(str(tmp_path), rows))


def test_no_values_in_the_output_unless_asked(tmp_path: Path) -> None:
    path = write(str(tmp_path), _contacts(6))
    assert "id_8000" not in infer_text(path) and "Person0" not in infer_text(path)
    assert "'id_8000'" in infer_text(path, show_values=True)


def test_inferred_contract_flags_an_invented_id(tmp_path: Path) -> None:
    train = write(str(tmp_path), _contacts(6), "train.jsonl")
    text = infer_text(train)
    bad = write(str(tmp_path), _contacts(2, bad=1), "test.jsonl")
    assert flagged(bad, text) == [("r00", 2, "dependency.contact_id")]


def test_a_value_only_a_result_showed_is_a_counterexample_to_grounded(tmp_path: Path) -> None:
    # Without the run's tool list a replay declares a tool when it first sees it, so the
    # lookup's result is not observed before `verify` is: its value is not seen there.
    rows = [
        run(f"r{i}", f"my passport is P1234{i}", ("verify", {"passport": f"P1234{i}"}, {}))
        for i in range(6)
    ]
    rows.append(
        run(
            "r9",
            "check me",
            ("lookup", {"who": "me"}, {"passport": "Q98765"}),
            ("verify", {"passport": "Q98765"}, {}),
        )
    )
    path = write(str(tmp_path), rows)
    strict = tomllib.loads(infer_text(path, min_share=1.0))
    assert "grounded" not in strict.get("tools", {}).get("verify", {})
    text = infer_text(path, min_share=0.8)
    assert (
        "# grounded passport: support 6 trajectories and 6 distinct values, "
        "share 0.8571 (6/7 values); " in text
    )
    assert "counterexamples: r9" in text
    assert flagged(path, text) == [("r9", 2, "information.passport")]


def _removals(n: int, *, reused: int = 0) -> list[dict]:
    """Each run finds a contact, reads it, removes it, then reads it again: the environment
    rejects that read, except in the first ``reused`` runs (it accepted a stale id)."""
    rows = []
    for i in range(n):
        cid = f"id_{7000 + i}"
        rows.append(
            run(
                f"r{i:02d}",
                f"remove Person{i}",
                ("search_contact", {"name": f"Person{i}"}, {"contacts": [{"id": cid}]}),
                ("get_contact", {"contact_id": cid}, {"name": f"Person{i}"}),
                ("remove_contact", {"contact_id": cid}, {"ok": True}),
                ("get_contact", {"contact_id": cid}, {"name": f"Person{i}"}),
                error_at=None if i < reused else 3,
            )
        )
    return rows


def test_invalidates_where_later_uses_were_rejected(tmp_path: Path) -> None:
    text = infer_text(write(str(tmp_path), _removals(6)))
    data = tomllib.loads(text)
    assert data["tools"]["remove_contact"]["invalidates"] == {"contact_id": "contact_id"}
    # Reading a contact leaves it usable: the removal after it was accepted.
    assert "invalidates" not in data["tools"]["get_contact"]
    assert (
        "# invalidates contact_id -> contact_id (6 later use(s) rejected, 0 vanished from "
        "results): support 6 trajectories and 6 distinct values, share 1.0000 (6/6 values)" in text
    )


def test_invalidates_counterexample_an_accepted_later_use(tmp_path: Path) -> None:
    path = write(str(tmp_path), _removals(10, reused=1))
    strict = tomllib.loads(infer_text(path, min_share=1.0))
    assert "invalidates" not in strict["tools"]["remove_contact"]
    text = infer_text(path, min_share=0.9)
    assert "share 0.9000 (9/10 values); counterexamples: r00" in text
    assert ("r00", 4, "dependency.contact_id") in flagged(path, text)


def test_invalidates_where_the_value_vanished_from_results(tmp_path: Path) -> None:
    rows = []
    for i in range(6):
        a, b = f"f{i}_report.txt", f"f{i}_notes.txt"
        rows.append(
            run(
                f"r{i}",
                "tidy up",
                ("list_files", {"folder": "home"}, {"files": [a, b]}),
                ("delete_file", {"file_name": a}, {"ok": True}),
                ("list_files", {"folder": "home"}, {"files": [b]}),
                ("read_file", {"file_name": b}, {"text": "..."}),
            )
        )
    data = tomllib.loads(infer_text(write(str(tmp_path), rows)))
    assert data["tools"]["read_file"]["refs"] == {"file_name": "file"}
    assert data["tools"]["delete_file"]["invalidates"] == {"file_name": "file"}


def test_invalidated_values_produced_again_are_live(tmp_path: Path) -> None:
    # A removed id a later search finds again may be used: no counterexample, no flag.
    rows = _removals(6)
    for i in range(4):
        cid = f"id_{7100 + i}"
        rows.append(
            run(
                f"s{i}",
                "remove and restore",
                ("search_contact", {"name": f"Q{i}"}, {"contacts": [{"id": cid}]}),
                ("remove_contact", {"contact_id": cid}, {"ok": True}),
                ("search_contact", {"name": f"Q{i}"}, {"contacts": [{"id": cid}]}),
                ("get_contact", {"contact_id": cid}, {"name": f"Q{i}"}),
            )
        )
    path = write(str(tmp_path), rows)
    text = infer_text(path, min_share=1.0)
    assert tomllib.loads(text)["tools"]["remove_contact"]["invalidates"] == {
        "contact_id": "contact_id"
    }
    assert [f for f in flagged(path, text) if f[0].startswith("s")] == []


def _bookings(n: int) -> list[dict]:
    classes = ["economy", "business", "first"]
    return [
        run(
            f"r{i}",
            f"book a seat for trip {i}",
            ("book", {"seat_class": classes[i % 3], "price": 120 + 35 * i}, {"ok": True}),
        )
        for i in range(n)
    ]


def test_enums_and_ranges_only_as_comments_and_values_only_if_asked(tmp_path: Path) -> None:
    path = write(str(tmp_path), _bookings(9))
    text = infer_text(path)
    assert tomllib.loads(text).get("tools", {}) == {}  # never a rule
    assert "# book:" in text
    assert (
        "# seen seat_class: 3 distinct strings in 9 calls, 9 trajectories "
        "(the schema lists no enum)\n" in text
    )
    assert "# seen price: numbers in 9 calls, 9 trajectories (the schema gives no range)\n" in text
    assert "economy" not in text and "400" not in text
    shown = infer_text(path, show_values=True)
    assert "(the schema lists no enum): 'business', 'economy', 'first'" in shown
    assert "(the schema gives no range): from 120 to 400" in shown


def test_no_enum_comment_for_many_distinct_values_or_little_support(tmp_path: Path) -> None:
    rows = [run(f"r{i}", "go", ("book", {"seat_class": f"class{i}"}, {})) for i in range(9)]
    assert "seat_class" not in infer_text(write(str(tmp_path), rows, "many.jsonl"))
    few = write(str(tmp_path), _bookings(4), "few.jsonl")  # 4 trajectories < min-support 5
    assert "# seen" not in infer_text(few)


def test_no_comment_where_the_schema_says(tmp_path: Path) -> None:
    rows = _bookings(9)
    schema = {
        "type": "object",
        "properties": {
            "seat_class": {"type": "string", "enum": ["economy", "business", "first"]},
            "price": {"type": "integer", "minimum": 0},
        },
    }
    for row in rows:
        row["tools"] = [{"type": "function", "function": {"name": "book", "parameters": schema}}]
    assert "# seen" not in infer_text(write(str(tmp_path), rows))


def test_a_grounded_rule_needs_distinct_values(tmp_path: Path) -> None:
    # Six runs, but two cities between them: a value of few that the text happens to hold,
    # or one scenario run again, is no independent evidence (2 distinct < min-distinct 5).
    rows = [
        run(f"r{i}", f"fly to City{i % 2}", ("book", {"city": f"City{i % 2}"}, {"ok": 1}))
        for i in range(6)
    ]
    path = write(str(tmp_path), rows)
    assert "grounded" not in tomllib.loads(infer_text(path)).get("tools", {}).get("book", {})
    text = infer_text(path, min_distinct=2)
    assert "# grounded city: support 6 trajectories and 2 distinct values" in text


def test_a_refs_rule_needs_no_distinct_values(tmp_path: Path) -> None:
    # A backend handing out the same id each run still shows where the argument comes from.
    rows = [
        run(
            f"r{i}",
            "book and cancel",
            ("book_flight", {"to": "Paris"}, {"booking_id": "3426812"}),
            ("cancel_booking", {"booking_id": "3426812"}, {"ok": True}),
        )
        for i in range(6)
    ]
    data = tomllib.loads(infer_text(write(str(tmp_path), rows)))
    assert data["tools"]["cancel_booking"]["refs"] == {"booking_id": "booking_id"}


def test_records_keyed_by_data_are_one_key_name_place(tmp_path: Path) -> None:
    # Each product's variants are keyed by their own ids: no exact path repeats, the key does.
    rows = []
    for i in range(6):
        item = f"item_{5000 + i}"
        rows.append(
            run(
                f"r{i}",
                "exchange it",
                ("get_product", {"product": f"P{i}x"}, {"variants": {item: {"item_id": item}}}),
                ("exchange", {"new_item_id": item}, {"ok": True}),
            )
        )
    path = write(str(tmp_path), rows)
    data = tomllib.loads(infer_text(path))
    assert data["tools"]["exchange"]["refs"] == {"new_item_id": "item_id"}
    assert data["tools"]["get_product"]["produces"] == {"item_id": "item_id"}
    assert flagged(path, infer_text(path)) == []


def _graphs(n: int) -> list[dict]:
    """Read a graph, then delete a note found in it: a nested list of scalars each time."""
    rows = []
    for i in range(n):
        notes = [f"met on day {i}", f"likes topic {i}"]
        rows.append(
            run(
                f"g{i:02d}",
                "tidy the notes",
                ("read_graph", {}, {"entities": [{"name": f"Person{i}", "notes": notes}]}),
                ("search_nodes", {"query": "person"}, {"entities": [{"name": f"Person{i}",
                                                                     "notes": notes}]}),
                ("delete_notes", {"deletions": [{"who": f"Person{i}", "notes": notes[1:]}]},
                 {"ok": True}),
            )
        )  # fmt: skip
    return rows


def test_a_nested_list_of_scalars_is_checked_item_by_item(tmp_path: Path) -> None:
    path = write(str(tmp_path), _graphs(6))
    text = infer_text(path)
    tools = tomllib.loads(text)["tools"]
    # With its `[]`: without it the guard compares the whole list with each bound note.
    assert tools["delete_notes"]["refs"]["deletions[].notes[]"] == "note"
    # The same path in a second tool's result that produced the notes too is a producer.
    for tool in ("read_graph", "search_nodes"):
        assert tools[tool]["produces"]["entities[].notes[]"] == "note", tool
    assert flagged(path, text) == []  # runs that never failed: none flagged


def _tweets(n: int) -> list[dict]:
    """A backend numbering its records from 0: the id a post returned is a small integer."""
    return [
        run(
            f"t{i:02d}",
            "post something, then comment on it",
            ("post_tweet", {"content": f"hello number {i}"}, {"id": i % 3, "likes": i % 3}),
            ("comment", {"tweet_id": i % 3, "comment_content": "nice one"}, {"ok": True}),
            ("set_page", {"page": i % 3}, {"ok": True}),
        )
        for i in range(n)
    ]


def test_a_small_integer_is_evidence_as_an_id_a_result_named(tmp_path: Path) -> None:
    path = write(str(tmp_path), _tweets(6))
    tools = tomllib.loads(infer_text(path))["tools"]
    assert tools["comment"]["refs"] == {"tweet_id": "id"}
    assert tools["post_tweet"]["produces"] == {"$.id": "id"}  # not `likes`, which is no id
    assert "set_page" not in tools  # a small number under no id's name: too common
    flow = trace_runs(read_runs("openai", [path]), rule=CommonRule(named_ids=False))
    assert [p for p in propose(flow) if p.what == "refs"] == []


def _orders() -> list[dict]:
    """Orders placed, looked up, cancelled; two runs cancel one found by a listing. The greedy
    cover of `cancel_order.order_id` takes `get_order_details`' `$.id` (8 values), which
    `place_order`'s `$.order_id` (6) does not beat, though it produced those 6 first."""
    rows = []
    for i in range(8):
        oid = f"ord_{7000 + i}"
        first = (
            ("place_order", {"symbol": "ACME"}, {"order_id": oid})
            if i < 6
            else ("list_orders", {}, {"orders": [oid]})
        )
        rows.append(
            run(
                f"r{i}",
                "cancel the order I have",
                first,
                ("get_order_details", {"order_id": oid}, {"id": oid, "status": "open"}),
                ("cancel_order", {"order_id": oid}, {"cancelled": True}),
            )
        )
    return rows


def test_a_kind_producing_another_arguments_values_is_merged_with_it(tmp_path: Path) -> None:
    # `place_order`'s result, a producer of `get_order_details.order_id`'s kind, fed
    # `cancel_order.order_id` in 6 trajectories: the two producers feed one argument, so
    # theirs is one kind, and a cancel straight after placing the order is legal.
    text = infer_text(write(str(tmp_path), _orders()))
    tools = tomllib.loads(text)["tools"]
    kind = tools["get_order_details"]["refs"]["order_id"]
    assert tools["cancel_order"]["refs"]["order_id"] == kind
    assert tools["place_order"]["produces"] == {"$.order_id": kind}
    assert tools["get_order_details"]["produces"] == {"$.id": kind}
    later = tmp_path / "later"
    later.mkdir()
    direct = run(
        "direct",
        "place an order, then cancel it",
        ("place_order", {"symbol": "ACME"}, {"order_id": "ord_9999"}),
        ("cancel_order", {"order_id": "ord_9999"}, {"cancelled": True}),
        ("cancel_order", {"order_id": "ord_made_up"}, {"cancelled": True}),
    )
    # Only the invented id (steps count from 1).
    assert flagged(write(str(later), [direct]), text) == [("direct", 3, "dependency.order_id")]


def test_a_kind_is_not_merged_on_fewer_feeding_trajectories_than_min_support(
    tmp_path: Path,
) -> None:
    rows = _orders()[2:]  # place_order fed cancel_order in 4 trajectories only
    tools = tomllib.loads(infer_text(write(str(tmp_path), rows), min_support=5))["tools"]
    assert (
        tools["cancel_order"]["refs"]["order_id"] != tools["get_order_details"]["refs"]["order_id"]
    )
