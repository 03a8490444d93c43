"""The HTML report without a browser: what the page holds, that it holds nothing to fetch, that
span text is escaped on the way in, its size, and the command line (the browser checks are in
test_html_browser.py)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from html_cohort import HOSTILE_LABEL, HOSTILE_MESSAGE, HOSTILE_TOOL, cohort
from spanfiles import Writer, call, export, summary

import toolguard as tg
from toolguard import _contract as A
from toolguard._cli import main
from toolguard.report.escape import printable
from toolguard.report.html import HtmlUnavailable, json_for_script, render_html
from toolguard.report.metrics import CONTENT_CUT, FirstError, TrajectoryRecord

pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")

_DATA = re.compile(r'<script type="application/json" id="toolguard-data">(.*?)</script>', re.S)


def page_json(page: str) -> dict:  # type: ignore[type-arg]
    m = _DATA.search(page)
    assert m is not None
    return json.loads(m.group(1))  # type: ignore[no-any-return]


@pytest.fixture
def cohort_file(write_lines: Writer) -> Path:
    return write_lines(cohort().lines)


def test_records_keep_the_first_failing_calls_tool_check_and_message(
    cohort_file: Path,
) -> None:
    records, _ = tg.read_records([str(cohort_file)])
    by_id = {r.trajectory_id: r for r in records}
    assert by_id["alpha-001"].first_error == FirstError("tool_1", "dependency.check_1", "bad 1")
    assert by_id["h-002"].first_error == FirstError(
        HOSTILE_TOOL, "precondition.check_2", HOSTILE_MESSAGE
    )
    assert by_id["alpha-005"].executable and by_id["alpha-005"].first_error is None


def test_recorded_content_is_shown_cut_and_only_when_recorded(write_lines: Writer) -> None:
    bad = call("t", 1, False, "schema")
    bad["attributes"] += [
        {"key": A.GEN_AI_TOOL_CALL_ARGUMENTS, "value": {"stringValue": '{"x": "' + "a" * 500}},
        {"key": A.GEN_AI_TOOL_CALL_RESULT, "value": {"stringValue": "no such x"}},
    ]
    with_content = write_lines([export(bad, summary("t", 1, 1, "schema"))], "c.jsonl")
    plain = write_lines([export(call("u", 1, False, "schema"), summary("u", 1, 1))], "p.jsonl")
    [rec], _ = tg.read_records([str(with_content)])
    assert rec.first_error is not None
    assert rec.first_error.arguments is not None
    assert len(rec.first_error.arguments) == CONTENT_CUT
    assert rec.first_error.arguments.endswith("...")
    assert rec.first_error.result == "no such x"
    table = page_json(tg.build_report([rec]).to_html())["trajectories"]
    assert table["strings"][table["cols"]["res"][0]] == "no such x"
    [rec2], _ = tg.read_records([str(plain)])
    table2 = page_json(tg.build_report([rec2]).to_html())["trajectories"]
    assert "args" not in table2["cols"] and "res" not in table2["cols"]  # no empty columns


def test_the_page_fetches_nothing_and_holds_three_scripts(cohort_file: Path) -> None:
    records, _ = tg.read_records([str(cohort_file)])
    page = tg.build_report(records, by=["model"]).to_html()
    # No element loads anything: every script is inline, no stylesheet, image or frame.
    assert re.findall(r"<script\b[^>]*>", page) == [
        '<script type="application/json" id="toolguard-data">',
        "<script>",
        "<script>",
    ]
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page.split("<script>")[0])
    assert "default-src 'none'" in page  # and the browser is told to fetch nothing either


def test_span_text_cannot_leave_the_data_element(cohort_file: Path) -> None:
    records, _ = tg.read_records([str(cohort_file)])
    page = tg.build_report(records, by=["model"]).to_html()
    m = _DATA.search(page)
    assert m is not None
    raw = m.group(1)
    assert "<" not in raw and ">" not in raw and "&" not in raw
    assert "\u2028" not in raw and "\x1b" not in raw
    data = json.loads(raw)
    # Shown as written, control characters as visible escapes (escape.printable).
    assert printable(f"model={HOSTILE_LABEL}") in data["group_names"]
    assert HOSTILE_TOOL in data["trajectories"]["strings"]
    assert printable(HOSTILE_MESSAGE) in data["trajectories"]["strings"]
    # Plotly parses a little HTML in names and tick labels: there they are entities.
    ticks = data["figures"]["causes"]["layout"]["xaxis"]["ticktext"]
    assert not any("<" in t for t in ticks)
    assert any("&lt;script&gt;" in t for t in ticks)


def test_json_for_script_round_trips() -> None:
    value = {"s": "</script><!-- \u2028 & ' \"", "n": [1, None, 0.5]}
    assert json.loads(json_for_script(value)) == value


def test_figures_and_tables_count_what_the_report_counts(cohort_file: Path) -> None:
    records, _ = tg.read_records([str(cohort_file)])
    report = tg.build_report(records, by=["model"])
    data = page_json(report.to_html())
    c = cohort()
    assert data["trajectories"]["shown"] == data["trajectories"]["total"] == c.n
    assert len(data["groups"]) == 4 and data["groups"][-1]["overall"]  # 3 groups and all
    figs = data["figures"]
    assert len(figs["pec"]["data"]) == 2 * 3  # PEC and PEC-eligible per group
    assert [t["name"] for t in figs["causes"]["data"]] == list(A.CAUSES)
    for t in figs["causes"]["data"]:
        assert sum(t["y"]) == c.by_cause[t["name"]]
    decomposition = figs["decomposition"]["data"]
    for i, g in enumerate(report["groups"]):
        total = decomposition[0]["y"][i] + decomposition[1]["y"][i]
        assert total == pytest.approx(g["final_success"])  # every Y known: the identity


def test_the_decomposition_adds_up_when_some_outcomes_are_unknown() -> None:
    records = [
        TrajectoryRecord("a", 1, 2, success=True),  # executable
        TrajectoryRecord("b", 0, 1, success=None),  # executable, outcome unknown
        TrajectoryRecord("c", 1, 1, success=True),  # recovered
        TrajectoryRecord("d", 1, 1, success=False),
    ]
    report = tg.build_report(records)
    (group,) = report["groups"]
    assert (group["ter"], group["s"], group["rr"]) == (0.5, 1.0, 0.5)
    figure = page_json(report.to_html())["figures"]["decomposition"]
    executable, recovered = figure["data"][0]["y"][0], figure["data"][1]["y"][0]
    # TER over the three with a known outcome (1 of 3): 1/3 x 1 + 2/3 x 1/2 = 2/3
    assert executable + recovered == pytest.approx(group["final_success"]) == pytest.approx(2 / 3)
    assert figure["layout"]["title"]["text"].endswith("over the trajectories with a known outcome")


def test_a_large_cohort_lists_its_first_rows_and_says_so() -> None:
    records = [TrajectoryRecord(f"t{i:05d}", 1, 2, success=True) for i in range(50)]
    data = page_json(tg.build_report(records).to_html(max_rows=20))
    assert data["trajectories"]["shown"] == 20 and data["trajectories"]["total"] == 50
    assert data["groups"][0]["n"] == 50  # the figures count every one


def test_ten_thousand_trajectories_make_a_page_of_a_few_mb() -> None:
    causes = list(A.CAUSES)
    records = []
    for i in range(10_000):
        k = i % 7
        tid, labels = f"run-2026-11-30/traj-{i:06d}", {"model": f"m{i % 4}", "method": f"k{i % 3}"}
        if k < 5:
            fe = FirstError(f"tool_{i % 40}", f"{causes[k]}.c{i % 30}", f"reason {i % 300} x")
            records.append(
                TrajectoryRecord(tid, 8, 1 + i % 8, causes[k], i % 3 == 0, labels, first_error=fe)
            )
        else:
            records.append(TrajectoryRecord(tid, 8, 9, None, True, labels))
    page = tg.build_report(records, by=["model", "method"]).to_html()
    size = len(page.encode())
    table = len(_DATA.search(page).group(1))  # type: ignore[union-attr]
    print(f"10,000 trajectories: page {size / 1e6:.2f} MB, of which data {table / 1e6:.2f} MB")
    assert table < 1_000_000  # the data; plotly.js is the rest (about 4.8 MB)
    assert size < 6_500_000


def test_without_plotly_the_error_names_the_extra(
    cohort_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    records, _ = tg.read_records([str(cohort_file)])
    report = tg.build_report(records)
    monkeypatch.setitem(sys.modules, "plotly.offline", None)  # import fails
    with pytest.raises(HtmlUnavailable, match=r"toolguard-otel\[html\]"):
        render_html(report, records)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    assert main(["report", str(cohort_file), "--format", "html", "--quiet"]) == 2
    assert "pip install 'toolguard-otel[html]'" in capsys.readouterr().err


def test_report_and_compare_write_html_files(
    cohort_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    argv = ["report", str(cohort_file), "--by", "model", "--format", "html", "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0
    assert capsys.readouterr().err == f"toolguard: wrote {out}\n"
    assert page_json(out.read_text())["trajectories"]["total"] == cohort().n
    cmp_out = tmp_path / "c.html"
    assert main(["compare", str(cohort_file), "--by", "model", "--a", "alpha", "--b", "beta",
                 "--format", "html", "--out", str(cmp_out), "--quiet"]) == 0  # fmt: skip
    data = page_json(cmp_out.read_text())
    assert data["comparison"]["a"] == "model=alpha"
    assert set(data["comparison"]["metrics"]) == {"ter", "auc_pec", "final_success"}
    assert len(data["figures"]["compare"]["data"]) == 1
    assert data["trajectories"]["total"] == 24  # the two sides' trajectories only
    assert main([*argv, "--out", str(tmp_path / "no" / "such" / "dir.html")]) == 2
    assert "--out" in capsys.readouterr().err


def test_build_report_stays_the_report_dict(cohort_file: Path) -> None:
    records, _ = tg.read_records([str(cohort_file)])
    report = tg.build_report(records, by=["model"])
    assert json.loads(json.dumps(report)) == dict(report)
    assert report == dict(report) and "to_html" not in report


def test_a_report_without_its_records_has_the_figures_only(cohort_file: Path) -> None:
    """As a report computed in SQL (--clickhouse) is: nothing to list, and the page says so."""
    records, _ = tg.read_records([str(cohort_file)])
    report = dict(tg.build_report(records, by=["model"]))  # a plain dict: no records kept
    page = render_html(report, None, by=["model"])  # type: ignore[arg-type]
    data = page_json(page)
    assert data["trajectories"] is None
    assert len(data["figures"]["pec"]["data"]) == 6
    assert "No trajectory table" in page  # the script's note
