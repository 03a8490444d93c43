"""--cost: mean tokens of the model calls and mean tool time per trajectory, the same in the
Python report, the Python report of otel_traces rows and the SQL report (chdb)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from spanfiles import Writer, call, export, span, summary

from toolguard.report.build import build_report, read_warnings
from toolguard.report.read import read_records

IN, OUT = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
T1, T2, T3, SHARED = "1" * 32, "2" * 32, "3" * 32, "4" * 32


def timed(s: dict[str, Any], start: int, end: int) -> dict[str, Any]:
    s["startTimeUnixNano"], s["endTimeUnixNano"] = str(start), str(end)
    return s


def model(trace: str, tokens_in: Any, tokens_out: Any = None, span_id: str | None = None) -> Any:
    attrs = {"gen_ai.operation.name": "chat"}
    if tokens_in is not None:
        attrs[IN] = tokens_in
    if tokens_out is not None:
        attrs[OUT] = tokens_out
    return span(attrs, trace=trace, span_id=span_id, name="chat model")


def cohort() -> list[dict[str, Any]]:
    m1 = model(T1, 100, 20, span_id="00000000000000m1")
    return [
        export(
            timed(call("a", 1, trace=T1), 0, 2_000_000),
            timed(call("a", 2, False, "schema", trace=T1), 10, 1_000_010),
            summary("a", 2, 2, "schema", True, {"model": "x"}, trace=T1),
            m1,
            model(T1, "50", "7"),  # digits as ClickHouse stores them
        ),
        # The same model span again (one batch exported twice), and a call span twice.
        export(m1, timed(call("a", 1, trace=T1, span_id="00000000000000c1"), 0, 5)),
        export(timed(call("a", 1, trace=T1, span_id="00000000000000c1"), 0, 5)),
        export(
            timed(call("b", 1, trace=T2), 100, 400_100),
            summary("b", 1, 2, success=False, labels={"model": "x"}, trace=T2),
            model(T2, None, 9),  # output only
            model(T2, "lots", None),  # no valid count: ignored, counted as invalid
            model(T2, -3, 4),  # a negative count is invalid, the output still counts
        ),
        # Two trajectories in one trace: its model spans are attributed to neither.
        export(
            summary("c", 0, 1, labels={"model": "y"}, trace=SHARED),
            timed(call("d", 1, trace=SHARED), 0, 3_000_000),
            summary("d", 1, 2, success=True, labels={"model": "y"}, trace=SHARED),
            model(SHARED, 1000, 1000),
        ),
        # A trajectory without model spans, and model spans in a trace of no trajectory.
        export(summary("e", 0, 1, labels={"model": "y"}, trace=T3), model("9" * 32, 5, 5)),
    ]


def test_cost_figures(write_lines: Writer) -> None:
    path = write_lines(cohort())
    records, stats = read_records([str(path)], cost=True)
    report = build_report(records, by=["model"], warnings=read_warnings(stats), cost=True)
    x, y = (g["cost"] for g in report["groups"])
    # a: 100 + 50 in, 20 + 7 out (m1 once); b: 0 in, 9 + 4 out. Both have model spans.
    assert x["n_with_tokens"] == 2
    assert x["mean_input_tokens"] == (150 + 0) / 2 and x["mean_output_tokens"] == (27 + 13) / 2
    # a: 2 ms + 1 ms + 5 ns (c1 once), b: 0.4 ms.
    assert x["n_with_latency"] == 2
    assert x["mean_tool_ms"] == (2_000_000 + 1_000_000 + 5 + 400_000) / 2 / 1e6
    # c and e have no call span and no attributed model span; d's trace is shared.
    assert y == {
        "n_with_tokens": 0,
        "mean_input_tokens": None,
        "mean_output_tokens": None,
        "n_with_latency": 1,
        "mean_tool_ms": 3.0,
    }
    assert report["overall"]["cost"]["n_with_latency"] == 3
    warnings = " ".join(report["warnings"])
    assert "cost_unattributed_spans: 1 model-call spans" in warnings
    assert "2 model-call spans have a token count that is not a whole number" in warnings


def test_cost_columns_in_every_format(write_lines: Writer) -> None:
    from toolguard._cli import main

    path = str(write_lines(cohort()))
    import contextlib
    import io

    def run(*args: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["report", path, "--by", "model", "--cost", "--quiet", *args]) == 0
        return out.getvalue()

    table = run()
    assert "in tok  out tok  tool ms" in table.splitlines()[1]
    row = next(line for line in table.splitlines() if line.startswith("model=x"))
    assert row.split()[-3:] == ["75.0", "20.0", "1.70"]
    csv_head = run("--format", "csv").splitlines()[0].split(",")
    assert csv_head[-5:] == [
        "n_with_tokens",
        "mean_input_tokens",
        "mean_output_tokens",
        "n_with_latency",
        "mean_tool_ms",
    ]
    assert "| in tok | out tok | tool ms |" in run("--format", "markdown")
    assert json.loads(run("--format", "json"))["overall"]["cost"]["n_with_tokens"] == 2
    assert "cost" not in json.loads(run_plain(path))["overall"]


def run_plain(path: str) -> str:
    import contextlib
    import io

    from toolguard._cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", path, "--format", "json", "--quiet"]) == 0
    return out.getvalue()


def test_cost_the_same_from_rows_and_in_sql(write_lines: Writer, tmp_path: Path) -> None:
    pytest.importorskip("chdb", reason="chdb (embedded ClickHouse) comes with the dev extra")
    from chdb_engine import RUN, load, python_report, to_rows

    from toolguard.report.clickhouse import sql_report

    path = write_lines(cohort())
    want = python_report([path], ["model"], cost=True)
    rows = to_rows([path], tmp_path / "rows.jsonl")
    assert json.dumps(python_report([rows], ["model"], cost=True)) == json.dumps(want)
    got = sql_report(RUN, load([path], tmp_path), by=["model"], cost=True)
    assert json.dumps(got) == json.dumps(want)


def _many(trajectories: int, calls: int, *, copies: int = 1) -> list[dict[str, Any]]:
    lines = []
    for t in range(trajectories):
        trace = f"{t + 1:032x}"
        spans = [
            timed(call(f"t{t}", k, trace=trace, span_id=f"{t * 1000 + k:016x}"), 0, 1000 * k)
            for k in range(1, calls + 1)
        ]
        spans.append(summary(f"t{t}", calls, calls + 1, None, True, trace=trace))
        lines += [export(*spans)] * copies
    return lines


def test_cost_memory_grows_by_words_per_call_span_not_dict_entries() -> None:
    """--cost keeps each call span as two 64-bit words of its trajectory (span id, duration),
    not a dict entry of three strings (about 370 bytes each: a million call spans took the
    report from about 220 to 580 MiB, now about 300)."""
    import tracemalloc

    from toolguard.report.cost import CostCollector

    lines = _many(200, 50)  # 10,000 call spans
    collector = CostCollector()
    tracemalloc.start()
    try:
        for line in lines:
            collector.feed(line)
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    per_span = kept / 10_000
    assert per_span < 40, f"{per_span:.0f} bytes kept per call span"


def test_cost_counts_a_span_read_twice_once(write_lines: Writer) -> None:
    once = write_lines(_many(3, 4), "once.jsonl")
    twice = write_lines(_many(3, 4, copies=2), "twice.jsonl")
    figures = [
        build_report(read_records([str(p)], cost=True)[0], cost=True)["overall"]["cost"]
        for p in (once, twice)
    ]
    assert figures[0] == figures[1]
    assert figures[0]["mean_tool_ms"] == (1 + 2 + 3 + 4) / 1000


PROMPT, COMPLETION = "llm.token_count.prompt", "llm.token_count.completion"
TOTAL = "llm.token_count.total"


def openinference_llm(trace: str, prompt: Any, completion: Any, **more: Any) -> Any:
    """An LLM span as OpenInference's instrumentations write it (and Phoenix keeps it)."""
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM"}
    for key, value in ((PROMPT, prompt), (COMPLETION, completion)):
        if value is not None:
            attrs[key] = value
    if isinstance(prompt, int) and isinstance(completion, int):
        attrs[TOTAL] = prompt + completion
    attrs.update(more)
    return span(attrs, trace=trace, name="ChatOpenAI")


def openinference_cohort() -> list[dict[str, Any]]:
    return [
        export(
            timed(call("a", 1, trace=T1), 0, 1_000_000),
            summary("a", 1, 2, success=True, labels={"model": "x"}, trace=T1),
            openinference_llm(T1, 10, 3),
            openinference_llm(T1, "20", "4"),  # digits, as ClickHouse stores them
            # A span carrying both spellings of a count is counted once, by gen_ai.usage.
            openinference_llm(T1, 999, 999, **{IN: 5, OUT: 1}),
        ),
        export(
            timed(call("b", 1, trace=T2), 0, 2_000_000),
            summary("b", 1, 2, success=False, labels={"model": "x"}, trace=T2),
            openinference_llm(T2, 7, None),  # prompt only
            openinference_llm(T2, "many", 2),  # no valid prompt count: a warning
            # gen_ai.usage present but invalid: not replaced by OpenInference's count
            openinference_llm(T2, 50, None, **{IN: "n/a"}),
        ),
    ]


def test_cost_reads_openinference_token_counts(write_lines: Writer, tmp_path: Path) -> None:
    path = write_lines(openinference_cohort())
    records, stats = read_records([str(path)], cost=True)
    report = build_report(records, by=["model"], warnings=read_warnings(stats), cost=True)
    (x,) = (g["cost"] for g in report["groups"])
    # a: 10 + 20 + 5 in, 3 + 4 + 1 out; b: 7 in, 2 out.
    assert x["n_with_tokens"] == 2
    assert x["mean_input_tokens"] == (35 + 7) / 2
    assert x["mean_output_tokens"] == (8 + 2) / 2
    assert "2 model-call spans have a token count that is not a whole number" in " ".join(
        report["warnings"]
    )
    # The reliability figures do not depend on the token spans.
    plain = build_report(read_records([str(path)])[0], by=["model"])
    assert {k: v for k, v in report["groups"][0].items() if k != "cost"} == plain["groups"][0]

    pytest.importorskip("chdb", reason="chdb (embedded ClickHouse) comes with the dev extra")
    from chdb_engine import RUN, load, python_report, to_rows

    from toolguard.report.clickhouse import sql_report

    want = python_report([path], ["model"], cost=True)
    rows = to_rows([path], tmp_path / "rows.jsonl")
    assert json.dumps(python_report([rows], ["model"], cost=True)) == json.dumps(want)
    got = sql_report(RUN, load([path], tmp_path), by=["model"], cost=True)
    assert json.dumps(got) == json.dumps(want)


JOINED = "langsmith.metadata.toolguard.trajectory.id"  # docs/protocol.md section 6.8
L1, L2, L3, L4, L5 = "a1" * 16, "a2" * 16, "a3" * 16, "a4" * 16, "a5" * 16


def langsmith_run(trace: str, tid: str) -> Any:
    """A span of LangSmith's OTel mode for a run whose metadata names the trajectory."""
    return span({"langsmith.span.kind": "chain", JOINED: tid}, trace=trace, name="LangGraph")


def joined_cohort() -> list[dict[str, Any]]:
    return [
        export(
            timed(call("a", 1, trace=T1), 0, 1_000_000),
            summary("a", 1, 2, success=True, labels={"model": "x"}, trace=T1),
        ),
        # LangSmith's trace of a's run: joined to a by its run's span, in any order.
        export(model(L1, 10, 3), model(L1, "20", "4")),
        export(langsmith_run(L1, "a")),
        export(
            timed(call("b", 1, trace=T2), 0, 2_000_000),
            summary("b", 1, 2, success=False, labels={"model": "x"}, trace=T2),
            model(T2, 5, 1),  # b's own trace has a model span too: both count
        ),
        export(langsmith_run(L2, "b"), model(L2, 7, 2)),
        # A trace naming two trajectories, and one naming b but holding a call span of c:
        # attributed to none.
        export(
            langsmith_run(L3, "a"),
            langsmith_run(L3, "b"),
            model(L3, 1000, 1000),
        ),
        export(
            timed(call("c", 1, trace=L4), 0, 3_000_000),
            summary("c", 1, 2, labels={"model": "y"}, trace=L4),
            langsmith_run(L4, "b"),
            model(L4, 1000, 1000),
        ),
        # An empty name joins nothing: a trace of no trajectory, not counted at all.
        export(langsmith_run(L5, ""), model(L5, 1000, 1000)),
    ]


def test_cost_joins_a_trace_that_names_its_trajectory(write_lines: Writer, tmp_path: Path) -> None:
    path = write_lines(joined_cohort())
    records, stats = read_records([str(path)], cost=True)
    report = build_report(records, by=["model"], warnings=read_warnings(stats), cost=True)
    x, y = (g["cost"] for g in report["groups"])
    # a: 10 + 20 in, 3 + 4 out (its LangSmith trace); b: 5 + 7 in, 1 + 2 out (both traces).
    assert x["n_with_tokens"] == 2
    assert (x["mean_input_tokens"], x["mean_output_tokens"]) == ((30 + 12) / 2, (7 + 3) / 2)
    # The joined traces add no call span: the tool time is the call spans' alone.
    assert x["mean_tool_ms"] == (1_000_000 + 2_000_000) / 2 / 1e6
    assert y["n_with_tokens"] == 0 and y["mean_tool_ms"] == 3.0
    assert "cost_unattributed_spans: 2 model-call spans" in " ".join(report["warnings"])
    # The reliability figures do not depend on the joined spans.
    plain = build_report(read_records([str(path)])[0], by=["model"])
    assert [{k: v for k, v in g.items() if k != "cost"} for g in report["groups"]] == plain[
        "groups"
    ]

    pytest.importorskip("chdb", reason="chdb (embedded ClickHouse) comes with the dev extra")
    from chdb_engine import RUN, load, python_report, to_rows

    from toolguard.report.clickhouse import sql_report

    want = python_report([path], ["model"], cost=True)
    rows = to_rows([path], tmp_path / "rows.jsonl")
    assert json.dumps(python_report([rows], ["model"], cost=True)) == json.dumps(want)
    got = sql_report(RUN, load([path], tmp_path), by=["model"], cost=True)
    assert json.dumps(got) == json.dumps(want)
