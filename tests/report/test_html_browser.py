"""The HTML report in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``), driven by Selenium through the system chromedriver (nothing downloaded),
opens the page from ``file://`` with the network switched off.

Checked: no console error and no uncaught exception; the trajectory table has one row per
trajectory; each chart drew the expected traces and bars; a cause chosen in the filter, or by
a click on its bar, leaves that cause's rows; hostile span text shows as text and no injected
script ran. A screenshot of each page is saved in out/ (the README shows the demo's)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from html_cohort import HOSTILE_LABEL, HOSTILE_MESSAGE, HOSTILE_TOOL, cohort
from spanfiles import Writer

from toolguard._cli import main
from toolguard.report.escape import printable

pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")
webdriver = pytest.importorskip(
    "selenium.webdriver", reason="the browser tests need selenium (the dev extra)"
)

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "out"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "no chromium/chromedriver on PATH: install them with "
        "`apt-get install -y chromium chromium-driver` (Debian; .ci/run does as root)",
        allow_module_level=True,
    )

# Run before any script of the page: collects errors, and would record an injected script.
_WATCH = """
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message)); });
window.addEventListener('unhandledrejection', function (e) {
  window.__errors.push('rejection: ' + String(e.reason)); });
var _error = console.error;
console.error = function () {
  window.__errors.push(Array.prototype.join.call(arguments, ' ')); _error.apply(console, arguments);
};
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # as root in a container
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,2000",
        # No host resolves and no proxy answers: nothing could be fetched even if tried.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=http://127.0.0.1:9",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd(
            "Network.emulateNetworkConditions",
            {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0},
        )
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _WATCH})
        yield driver
    finally:
        driver.quit()


def open_page(driver: Any, path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.resolve().as_uri())
    # Drawn when every figure's newPlot promise resolved (report.js marks each one).
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script(
            "return Array.from(document.querySelectorAll('.figure:not([hidden])'))"
            ".every(function (f) { return f.dataset.rendered === '1'; })"
        )
    )


def js(driver: Any, script: str) -> Any:
    return driver.execute_script(script)


def rows(driver: Any) -> int:
    return int(js(driver, "return document.querySelectorAll('#trajectories tbody tr').length"))


def no_errors(driver: Any) -> None:
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    assert js(driver, "return window.__errors") == []
    # Nothing was fetched: the page's only resources are the page itself.
    assert js(driver, "return performance.getEntriesByType('resource').length") == 0


def traces(driver: Any, fig: str) -> list[dict[str, Any]]:
    return list(
        js(
            driver,
            f"return document.getElementById('{fig}').data.map(function (t) {{"
            " return {name: t.name, n: (t.y || []).length}; })",
        )
    )


def select(driver: Any, which: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", f"filter-{which}")).select_by_value(value)


@pytest.fixture(scope="module")
def cohort_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("html")
    spans = tmp / "cohort.jsonl"
    write: Writer = _writer(tmp)
    write(cohort().lines, spans.name)
    page = tmp / "cohort.html"
    assert main(["report", str(spans), "--by", "model", "--format", "html", "--quiet",
                 "--out", str(page)]) == 0  # fmt: skip
    return page


def _writer(tmp: Path) -> Writer:
    import json

    def write(lines: Any, name: str = "spans.jsonl") -> Path:
        path = tmp / name
        path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        return path

    return write


def test_the_cohort_page_draws_counts_filters_and_escapes(browser: Any, cohort_page: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    c = cohort()
    open_page(browser, cohort_page)
    no_errors(browser)
    assert rows(browser) == c.n
    # One solid and one dotted curve per group; one bar per group in each cause's trace.
    assert len(traces(browser, "fig-pec")) == 2 * len(c.groups)
    assert traces(browser, "fig-causes") == [
        {"name": cause, "n": len(c.groups)} for cause in c.by_cause
    ]
    assert [t["n"] for t in traces(browser, "fig-decomposition")] == [len(c.groups)] * 3
    assert int(js(browser, "return document.querySelectorAll('#fig-causes .point').length")) > 0

    # Hostile text is shown as text: in the table, the legend and the tick labels.
    cells = js(browser, "return Array.from(document.querySelectorAll('#trajectories td'))"
                        ".map(function (td) { return td.textContent; })")  # fmt: skip
    assert printable(f"model={HOSTILE_LABEL}") in cells
    assert HOSTILE_TOOL in cells and printable(HOSTILE_MESSAGE) in cells
    legend = js(browser, "return Array.from(document.querySelectorAll('#fig-pec .legendtext'))"
                         ".map(function (t) { return t.textContent; }).join('|')")  # fmt: skip
    # All of it, tags too: Plotly would have drawn <b>bold</b> as bold text, without tags.
    assert "<script>window.__pwned = 1</script>\"'><b>bold</b>\\x1b[31m" in legend
    ticks = js(browser, "return Array.from(document.querySelectorAll('#fig-causes .xtick text'))"
                        ".map(function (t) { return t.textContent; }).join('|')")  # fmt: skip
    assert "<b>bold</b>" in ticks
    assert js(browser, "return window.__pwned") is None  # no injected script ran
    assert (
        js(
            browser,
            "return document.querySelectorAll('#trajectories img, "
            "#trajectories script, #groups script, .legendtext b').length",
        )
        == 0
    )

    # The cause filter leaves that cause's rows; then the tool filter narrows them.
    select(browser, "cause", "precondition")
    assert rows(browser) == c.by_cause["precondition"]
    select(browser, "tool", "tool_2")
    assert rows(browser) == 2 * c.by_group_cause[("alpha", "precondition")]  # alpha, beta
    select(browser, "cause", "(executable)")
    select(browser, "tool", "")
    assert rows(browser) == c.executable
    browser.find_element("id", "filter-clear").click()
    assert rows(browser) == c.n

    # Sorting by FED puts the first errors (FED 2) before the executable ones (FED 3).
    browser.find_element("css selector", "#trajectories thead th:nth-child(4)").click()
    feds = js(browser, "return Array.from(document.querySelectorAll("
                       "'#trajectories tbody td:nth-child(4)')).map(function (t) {"
                       " return +t.textContent; })")  # fmt: skip
    assert feds == sorted(feds) and feds[0] == 2 and feds[-1] == 3

    # A click on a cause's bar filters the table to that group and cause.
    bar = browser.find_elements("css selector", "#fig-causes .trace.bars")[0]
    point = bar.find_elements("css selector", ".point path")[0]  # schema, first group
    ActionChains(browser).move_to_element(point).click().perform()
    assert js(browser, "return document.getElementById('filter-cause').value") == "schema"
    assert rows(browser) == c.by_group_cause[(sorted(c.groups)[0], "schema")]
    no_errors(browser)
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / "html-report-hostile.png"))


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The demo's spans, written by the real guard, reported as the demo reports them."""
    tmp = tmp_path_factory.mktemp("demo")
    spans = tmp / "demo-spans.jsonl"
    subprocess.run(
        [sys.executable, "-m", "toolguard.demo", "--out", str(spans), "--no-report",
         "--episodes", "20"],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip
    page = tmp / "demo-report.html"
    assert main(["report", str(spans), "--by", "method", "--format", "html", "--quiet",
                 "--out", str(page)]) == 0  # fmt: skip
    return page, 40  # 20 episodes, each by ReAct and by Dual-Loop


def test_the_demo_page_opens_clean(browser: Any, demo_page: tuple[Path, int]) -> None:
    page, n = demo_page
    open_page(browser, page)
    no_errors(browser)
    assert rows(browser) == n
    groups = int(js(browser, "return JSON.parse(document.getElementById('toolguard-data')"
                             ".textContent).group_names.length"))  # fmt: skip
    assert len(traces(browser, "fig-pec")) == 2 * groups
    assert all(t["n"] == groups for t in traces(browser, "fig-causes"))
    shown = js(browser, "return document.getElementById('trajectory-count').textContent")
    assert shown.startswith(f"{n} of {n} trajectories shown")
    browser.set_window_size(1280, 1500)
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / "html-report.png"))


def test_the_compare_page_opens_clean(browser: Any, demo_page: tuple[Path, int]) -> None:
    page, n = demo_page
    spans = page.with_name("demo-spans.jsonl")
    cmp_page = page.with_name("demo-compare.html")
    assert main(["compare", str(spans), "--by", "loop", "--a", "react", "--b", "dual",
                 "--task-label", "episode", "--format", "html", "--quiet",
                 "--out", str(cmp_page)]) == 0  # fmt: skip
    open_page(browser, cmp_page)
    no_errors(browser)
    assert rows(browser) == n
    assert traces(browser, "fig-compare") == [{"name": "B - A", "n": 3}]
    assert rows_of(browser, "#compare-table") == 3


def rows_of(driver: Any, table: str) -> int:
    return int(js(driver, f"return document.querySelectorAll('{table} tbody tr').length"))


def test_a_real_recorded_set_tau2_airline(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """tau2's own airline domain through the guard (benchmarks/tau2, two tasks: ground truth
    and seeded wrong ids), reported as a page: it opens clean and lists every trajectory."""
    gate = pytest.importorskip("benchmarks.tau2._tau2")
    if (why := gate.tau2_import_error()) is not None:
        pytest.skip(why)
    import toolguard as tg

    tmp = tmp_path_factory.mktemp("tau2")
    subprocess.run(
        [sys.executable, "-m", "benchmarks.tau2.run", "--out", str(tmp), "--domains", "airline",
         "--limit", "2", "--jobs", "1"],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip
    [spans] = tmp.glob("spans-*.jsonl")
    records, _ = tg.read_records([str(spans)])
    failing = sum(not r.executable for r in records)
    page = tmp / "tau2-airline.html"
    assert main(["report", str(spans), "--by", "variant,context", "--format", "html",
                 "--quiet", "--out", str(page)]) == 0  # fmt: skip
    open_page(browser, page)
    no_errors(browser)
    assert rows(browser) == len(records)
    select(browser, "cause", "dependency")
    dependency = sum(r.first_error_cause == "dependency" for r in records)
    assert dependency > 0 and rows(browser) == dependency
    select(browser, "cause", "")
    # The seeded wrong ids fail on a named tool, with the guard's check id and message.
    tools = js(browser, "return Array.from(document.querySelectorAll("
                        "'#trajectories tbody td:nth-child(7)')).filter(function (t) {"
                        " return t.textContent; }).length")  # fmt: skip
    assert tools == failing > 0


def test_a_page_without_trajectories_opens_clean(
    browser: Any, cohort_page: Path, tmp_path: Path
) -> None:
    """A report computed in SQL (--clickhouse) has no records: the figures, and a note."""
    import toolguard as tg
    from toolguard.report.html import render_html

    records, _ = tg.read_records([str(cohort_page.with_name("cohort.jsonl"))])
    report = dict(tg.build_report(records, by=["model"]))
    page = tmp_path / "figures-only.html"
    page.write_text(render_html(report, None, by=["model"]), encoding="utf-8")  # type: ignore[arg-type]
    open_page(browser, page)
    no_errors(browser)
    assert rows(browser) == 0
    assert len(traces(browser, "fig-pec")) == 6
    note = js(browser, "return document.getElementById('trajectories-section').textContent")
    assert "No trajectory table" in note
