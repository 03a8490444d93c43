"""The report as SQL on ClickHouse (chdb) prints what the Python report prints: every field
of the JSON report, on the demo file, on each quirk of the reading rules, on random cohorts
full of quirks and on a generated exporter-shaped file."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("chdb", reason="chdb (embedded ClickHouse) comes with the dev extra")

from chdb_engine import RUN, load, python_report
from spanfiles import Writer, call, export, span, summary, trajectory

from toolguard import _contract as A
from toolguard.report.clickhouse import ClickHouseError, sql_report
from toolguard.report.clickhouse_sql import report_query
from toolguard.report.reader import ReportInputError

ROOT = Path(__file__).resolve().parents[2]


def same(files: list[Path], tmp: Path, by: list[str], cost: bool = False) -> dict[str, Any]:
    """Load ``files`` into a table, assert the SQL report equals the Python one, return it."""
    table = load(files, tmp)
    got = sql_report(RUN, table, by=by, cost=cost)
    want = python_report(files, by, cost)
    assert got["groups"] == want["groups"]
    assert got["overall"] == want["overall"]
    assert got["warnings"] == want["warnings"]
    # The JSON the command prints is the same text, key order included.
    assert json.dumps(got) == json.dumps(want)
    return dict(got)


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo.jsonl"
    subprocess.run(
        [sys.executable, "-m", "toolguard.demo", "--out", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@pytest.mark.parametrize(
    "by",
    [
        [],
        ["model", "method"],
        ["method", "nolabel", "method"],  # a key twice, a key no span has
        ["it's'; DROP TABLE x; --", "\\"],  # keys reach the query as hex only
    ],
)
def test_demo_file(demo_file: Path, tmp_path: Path, by: list[str]) -> None:
    report = same([demo_file], tmp_path, by)
    assert report["overall"]["n"] > 10 and report["overall"]["pec"]


def test_demo_file_with_cost(demo_file: Path, tmp_path: Path) -> None:
    report = same([demo_file], tmp_path, ["method"], cost=True)
    cost = report["overall"]["cost"]
    assert cost["n_with_latency"] == report["overall"]["n"] - report["overall"]["n_empty"]
    assert cost["mean_tool_ms"] is not None and cost["mean_tool_ms"] > 0


# Each quirk of the reading rules (docs/protocol.md section 5), as lines of one file or of
# several files loaded into one table.
_A, _B = "a" * 32, "b" * 32
QUIRKS: dict[str, list[list[dict[str, Any]]]] = {
    "duplicated spans": [
        [
            export(*trajectory("a", [True, "schema", True], False, {"model": "m"})),
            export(*trajectory("b", [True], True, {"model": "n"})),
        ]
    ],
    "duplicate without summary": [
        [export(call("x", 1), call("x", 2, False, "precondition"), call("x", 3))]
    ],
    "one trajectory across traces and files": [
        [export(call("t", 1, trace=_A), call("t", 2, trace=_A))],
        [
            export(
                call("t", 3, False, "information", trace=_B),
                summary("t", 3, 3, "information", True, {"model": "m"}, trace=_B),
            )
        ],
    ],
    "missing summaries": [
        [
            export(
                call("n", 1),
                call("n", 3, False, "schema"),
                call("n", 4),
                call("ok", 1),
                call("ok", 2),
                *trajectory("whole", [True, True], True, {"model": "m"}),
            )
        ]
    ],
    "call step beyond the summary": [
        [export(call("d", 1), call("d", 2), call("d", 3), summary("d", 2, 3, success=True))]
    ],
    "invalid call before the summary's FED": [
        [
            export(
                call("d", 1, False, "schema"),
                call("d", 2, False, "schema"),
                summary("d", 2, 2, "schema"),
            )
        ]
    ],
    "cause differs": [[export(call("d", 1, False, "precondition"), summary("d", 1, 1, "schema"))]],
    "cause filled from the call span": [
        [export(call("d", 1, False, "dependency"), summary("d", 2, 1))]
    ],
    "FED out of range": [[export(summary("d", 2, 7), summary("e", 0, 5, success=False))]],
    "several summaries, either order": [
        [
            export(summary("d", 2, 3, span_id="00000000000000aa", labels={"model": "x"})),
            export(summary("d", 2, 1, "schema", span_id="00000000000000bb")),
            export(summary("e", 2, 1, "schema", span_id="00000000000000bb")),
            export(summary("e", 2, 3, span_id="00000000000000aa", labels={"model": "y"})),
            export(call("e", 1), call("e", 2), call("e", 3)),
        ]
    ],
    "two different summaries under one span id": [
        [
            export(
                summary("d", 2, 3, success=True, span_id="00000000000000aa", labels={"model": "x"})
            ),
            export(summary("d", 2, 1, "schema", span_id="00000000000000aa")),
            export(summary("e", 1, 2, span_id="00000000000000cc")),
            export(summary("e", 1, 2, success=True, span_id="00000000000000cc")),
            export(summary("e", 1, 1, "schema", span_id="00000000000000bb")),
        ]
    ],
    "ties at one step": [
        [
            export(
                call("t", 2, False, "information", trace=_A),
                call("t", 2, False, "dependency", trace=_B),
                call("u", 1, False, "zzz"),
                call("u", 1, False, "aaa"),
                call("v", 1, False),
                call("v", 1, False, "weird"),
            )
        ]
    ],
    "integers as numbers": [
        [
            export(
                call("i", 1, int_as_number=True),
                call("i", 2, False, "schema", int_as_number=True),
                summary("i", 2, 2, "schema", True, int_as_number=True),
            )
        ]
    ],
    "foreign spans and calls outside trajectories": [
        [
            export(
                span({"http.method": "GET", A.STEP: 3}),
                span({}),
                {"traceId": "1", "spanId": "2", "name": "no attributes"},
                call(None, 1, False, "schema"),
                span({A.TRAJECTORY_ID: "a", "other": 1}),
                *trajectory("a", [True]),
            )
        ]
    ],
    "T = 0": [
        [
            export(
                summary("e", 0, 1, success=False),
                summary("f", 0, 1),
                *trajectory("g", [True], True),
            )
        ]
    ],
    "odd causes and unknown outcomes": [
        [
            export(
                summary("m", 2, 1, "mystery", True),
                summary("n", 3, 2, success=False),
                call("o", 1, False),
                summary("p", 1, 1, "", True),
            )
        ]
    ],
    "lost call spans": [
        [
            export(
                call("s", 1),
                call("s", 3, False, "schema"),
                summary("s", 5, 3, "schema", True, {"model": "m"}),
            )
        ]
    ],
}


@pytest.mark.parametrize("name", list(QUIRKS))
def test_reading_quirks(name: str, write_lines: Writer, tmp_path: Path) -> None:
    # Grouped on a label some trajectories lack; the demo tests cover the ungrouped query.
    files = [write_lines(lines, f"{i}.jsonl") for i, lines in enumerate(QUIRKS[name])]
    same(files, tmp_path, ["model"])


def _random_cohort(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """Trajectories with every quirk mixed in: lost call spans, missing and extra summaries,
    duplicates, disagreements, odd causes, unknown outcomes, missing labels."""
    spans: list[dict[str, Any]] = []
    causes = [*A.CAUSES, "mystery", None]
    for i in range(n):
        tid = f"t{i:04d}"
        trace = f"{rng.getrandbits(128):032x}"
        length = rng.choice([0, 1, 2, 3, 5, 8])
        validity = [rng.random() < 0.75 for _ in range(length)]
        for step, ok in enumerate(validity, 1):
            if rng.random() < 0.1:
                continue  # lost
            cause = None if ok else rng.choice(causes)
            sp = call(tid, step, ok, cause, trace=trace)
            spans.append(sp)
            if rng.random() < 0.1:
                spans.append(sp)  # exported twice
        bad = [s for s, ok in enumerate(validity, 1) if not ok]
        fed = bad[0] if bad else length + 1
        if rng.random() < 0.1:
            fed = rng.randint(1, length + 3)  # a summary that disagrees
        if rng.random() < 0.12:
            continue  # no summary: incomplete
        labels = {k: rng.choice(["x", "y"]) for k in ("model", "method") if rng.random() < 0.9}
        success = rng.choice([True, False, None])
        first = summary(
            tid,
            length,
            fed,
            rng.choice(causes) if fed <= length else None,
            success,
            labels,
            trace=trace,
        )
        spans.append(first)
        if rng.random() < 0.05:
            spans.append(summary(tid, length + 1, 1, "schema", trace=trace))
    rng.shuffle(spans)
    return spans


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_cohorts_full_of_quirks(seed: int, write_lines: Writer, tmp_path: Path) -> None:
    rng = random.Random(seed)
    spans = _random_cohort(rng, 150)
    lines = [export(*spans[i : i + 37]) for i in range(0, len(spans), 37)]
    path = write_lines(lines, f"random-{seed}.jsonl")
    report = same([path], tmp_path, ["model", "method"])
    assert report["overall"]["incomplete"] and report["overall"]["disagreements"]


def test_generated_exporter_shaped_file(tmp_path: Path) -> None:
    from benchmarks._spanfile import generate

    path = tmp_path / "generated.jsonl"
    info = generate(path, 400, 25, per_line=512)
    assert info["spans"] == 400 * 26
    same([path], tmp_path, ["model", "method"])
    same([path], tmp_path, ["model", "method"], cost=True)


def test_the_sql_ratio_columns_match_the_report(demo_file: Path, tmp_path: Path) -> None:
    """Whoever runs the query alone reads the same ratios (AUC-PEC up to float summation
    order: the report sums the terms exactly)."""
    table = load([demo_file], tmp_path)
    rows = RUN(report_query(table, by=["method"]))
    report = python_report([demo_file], ["method"])
    by_labels = {tuple(r["group_labels"]): r for r in rows}
    for g in report["groups"]:
        row = by_labels[(g["labels"]["method"],)]
        for key in ("ter", "mean_fed", "final_success", "rr", "s", "pec", "pec_elig"):
            assert row[key] == g[key], key
        assert row["n_at_depth"] == g["n_at_depth"]
        assert math.isclose(row["auc_pec"], g["auc_pec"], rel_tol=1e-12)


def test_where_selects_rows(write_lines: Writer, tmp_path: Path) -> None:
    both = write_lines(
        [
            export(*trajectory("a", [True, "schema"], True, {"model": "m"})),
            export(*trajectory("b", [True], False, {"model": "n"})),
        ],
        "both.jsonl",
    )
    only_a = write_lines([export(*trajectory("a", [True, "schema"], True, {"model": "m"}))])
    table = load([both], tmp_path)
    got = sql_report(
        RUN, table, by=["model"], where="SpanAttributes['toolguard.trajectory.id'] = 'a'"
    )
    assert json.dumps(got) == json.dumps(python_report([only_a], ["model"]))


def test_spans_that_break_the_contract(write_lines: Writer, tmp_path: Path) -> None:
    bad = call("x", 1)
    bad["attributes"] = [a for a in bad["attributes"] if a["key"] != A.STEP] + [
        {"key": A.STEP, "value": {"stringValue": " 3"}}  # int() would take it: not a decimal
    ]
    good = trajectory("a", [True], True)
    path = write_lines([export(*good), export(bad)])
    table = load([path], tmp_path)
    with pytest.raises(ClickHouseError, match=r"1 spans break.*toolguard\.step is not an integer"):
        sql_report(RUN, table)
    with pytest.raises(
        ReportInputError, match=r"spans\.jsonl:2: toolguard\.step is not an integer"
    ):
        python_report([path])
    # Skipped, it is one span (the Python reader of the same rows skips its line: one row).
    report = sql_report(RUN, table, skip_invalid=True)
    want = python_report([write_lines([export(*good)], "good.jsonl")])
    assert report["overall"] == want["overall"]
    assert report["warnings"][0].startswith("1 invalid spans skipped; the first: trace ")
