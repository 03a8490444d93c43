"""The reading rules of docs/protocol.md section 4, one by one, through files on disk."""

from __future__ import annotations

import random

import pytest
from spanfiles import Writer, call, export, span, summary, trajectory

from toolguard import _contract as A
from toolguard.report.metrics import TrajectoryRecord, compute_metrics
from toolguard.report.read import read_records


def read(
    write_lines: Writer, lines: list, name: str = "spans.jsonl"
) -> dict[str, TrajectoryRecord]:
    records, _ = read_records([str(write_lines(lines, name))])
    return {r.trajectory_id: r for r in records}


def test_summary_is_authoritative(write_lines: Writer) -> None:
    recs = read(
        write_lines, [export(*trajectory("a", [True, "dependency", True], True, {"model": "m"}))]
    )
    r = recs["a"]
    assert (r.length, r.fed, r.first_error_cause, r.success) == (3, 2, "dependency", True)
    assert r.labels == {"model": "m"} and not r.incomplete and r.disagreements == ()


def test_duplicated_spans_change_nothing(write_lines: Writer) -> None:
    spans = trajectory("a", [True, "schema", True], False) + trajectory("b", [True], True)
    once = read(write_lines, [export(*spans)])
    # Same (trace id, span id) exported twice, in separate lines and in another order.
    twice = read(
        write_lines,
        [export(*spans), export(*reversed(spans)), export(spans[1])],
        name="twice.jsonl",
    )
    assert once == twice
    assert all(not r.disagreements for r in twice.values())


def test_duplicate_without_summary_changes_nothing(write_lines: Writer) -> None:
    spans = [call("x", 1), call("x", 2, False, "precondition"), call("x", 3)]
    once = read(write_lines, [export(*spans)])
    twice = read(write_lines, [export(*spans), export(*spans)], name="twice.jsonl")
    assert once == twice and once["x"].fed == 2


def test_trajectory_across_traces_and_files(write_lines: Writer, tmp_path) -> None:
    f1 = write_lines(
        [export(call("t", 1, trace="a" * 32), call("t", 2, trace="a" * 32))], name="p1.jsonl"
    )
    f2 = write_lines(
        [
            export(
                call("t", 3, False, "information", trace="b" * 32),
                summary("t", 3, 3, "information", True, trace="b" * 32),
            )
        ],
        name="p2.jsonl",
    )
    records, stats = read_records([str(f1), str(f2)])
    assert len(records) == 1
    r = records[0]
    assert (r.length, r.fed, r.first_error_cause, r.incomplete) == (3, 3, "information", False)
    assert stats.files == [str(f1), str(f2)]


def test_missing_summary_is_incomplete_from_call_spans(write_lines: Writer) -> None:
    recs = read(
        write_lines,
        [
            export(
                call("n", 1),
                call("n", 3, False, "schema"),
                call("n", 4),
                call("ok", 1),
                call("ok", 2),
            )
        ],
    )
    n, ok = recs["n"], recs["ok"]
    assert (n.length, n.fed, n.first_error_cause, n.success, n.incomplete) == (
        4,
        3,
        "schema",
        None,
        True,
    )
    assert (ok.length, ok.fed, ok.incomplete) == (2, 3, True)
    assert compute_metrics(recs.values())["incomplete"] == 2


@pytest.mark.parametrize(
    ("spans", "kind"),
    [
        (
            [call("d", 1), call("d", 2), call("d", 3), summary("d", 2, 3)],
            "call step beyond the summary's length",
        ),
        (
            [
                call("d", 1, False, "schema"),
                call("d", 2, False, "schema"),
                summary("d", 2, 2, "schema"),
            ],
            "invalid call before the summary's FED",
        ),
        (
            [call("d", 1, False, "precondition"), summary("d", 1, 1, "schema")],
            "cause differs from the call span's",
        ),
        ([summary("d", 2, 7)], "summary FED out of range"),
        ([summary("d", 2, 3), summary("d", 2, 1, "schema")], "more than one summary span"),
    ],
)
def test_disagreements_are_counted_and_the_summary_kept(
    write_lines: Writer, spans: list, kind: str
) -> None:
    r = read(write_lines, [export(*spans)])["d"]
    assert len(r.disagreements) == 1 and r.disagreements[0].startswith(kind)
    assert compute_metrics([r])["disagreements"] == 1


def test_two_summaries_resolve_the_same_whatever_the_order(write_lines: Writer) -> None:
    s1 = summary("d", 2, 3, span_id="00000000000000aa")
    s2 = summary("d", 2, 1, "schema", span_id="00000000000000bb")
    a = read(write_lines, [export(s1, s2)])["d"]
    b = read(write_lines, [export(s2), export(s1)], name="b.jsonl")["d"]
    assert a == b and a.fed == 3


def test_tied_first_error_takes_the_cause_first_in_precedence(write_lines: Writer) -> None:
    c1 = call("t", 2, False, "information", trace="a" * 32)
    c2 = call("t", 2, False, "dependency", trace="b" * 32)
    for order in ([c1, c2], [c2, c1]):
        assert read(write_lines, [export(*order)])["t"].first_error_cause == "dependency"


@pytest.mark.parametrize("as_number", [False, True])
def test_integers_as_strings_or_numbers(write_lines: Writer, as_number: bool) -> None:
    lines = [
        export(
            call("i", 1, int_as_number=as_number),
            call("i", 2, False, "schema", int_as_number=as_number),
            summary("i", 2, 2, "schema", True, int_as_number=as_number),
        )
    ]
    r = read(write_lines, lines)["i"]
    assert (r.length, r.fed) == (2, 2) and not r.disagreements


def test_foreign_spans_and_calls_outside_trajectories_are_ignored(write_lines: Writer) -> None:
    foreign = [
        span({"http.method": "GET", A.STEP: 3}),
        span({}),
        {"traceId": "1", "spanId": "2", "name": "no attributes"},
        call(None, 1, False, "schema"),  # guarded call outside any trajectory
        span({A.TRAJECTORY_ID: "a", "other": 1}),
    ]  # ours, but neither call nor summary
    recs = read(write_lines, [export(*foreign, *trajectory("a", [True]))])
    assert list(recs) == ["a"] and recs["a"].fed == 2 and not recs["a"].disagreements


def test_empty_trajectory_t0(write_lines: Writer) -> None:
    r = read(write_lines, [export(summary("e", 0, 1, success=False))])["e"]
    assert (r.length, r.fed, r.executable) == (0, 1, True)
    m = compute_metrics([r])
    assert m["n_empty"] == 1 and m["auc_pec"] is None and m["pec"] == []


def test_labels_come_from_the_summary(write_lines: Writer) -> None:
    r = read(write_lines, [export(*trajectory("l", [True], labels={"model": "m", "task": "7"}))])
    assert r["l"].labels == {"model": "m", "task": "7"}


def test_shuffled_spans_give_the_same_records(write_lines: Writer) -> None:
    rng = random.Random(4)
    spans = []
    for i in range(30):
        vs = [rng.choice([True, True, "schema", "precondition"]) for _ in range(rng.randint(0, 6))]
        spans += trajectory(f"t{i}", vs, rng.choice([True, False]))
    base = read(write_lines, [export(*spans)])
    rng.shuffle(spans)
    shuffled = read(write_lines, [export(*spans[:40]), export(*spans[40:])], name="s.jsonl")
    assert base == shuffled
    assert all(not r.disagreements and not r.incomplete for r in base.values())
