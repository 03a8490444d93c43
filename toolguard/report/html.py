"""The report as one self-contained HTML page (``toolguard report --format html``).

One file, nothing fetched when it opens (works from ``file://``, offline): plotly.js (the
``plotly`` package's bundled copy, the optional extra ``html``) and the page's own script
(html_assets/report.js) are inlined, and the figures and tables are one JSON document in the
page (html_data.py). What the page shows and how it escapes span text: docs/report.md, "The
HTML report".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

from .._errors import ToolGuardError
from .html_data import DEFAULT_MAX_ROWS, page_data
from .metrics import TrajectoryRecord

if TYPE_CHECKING:
    from .build import Report
    from .compare import Comparison

HTML_EXTRA_HINT = "the HTML report needs plotly: pip install 'toolguard-otel[html]'"


class HtmlUnavailable(ToolGuardError):
    """plotly (whose bundled plotly.js the page inlines) is not installed."""


def _plotly_js() -> str:
    try:
        from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]
    except ImportError:
        raise HtmlUnavailable(HTML_EXTRA_HINT) from None
    js = str(get_plotlyjs())
    # Inlined in a <script> element: a "</script" inside would end it (plotly.js has none
    # today; a future build that did would still load).
    return js.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def _asset(name: str) -> str:
    return (resources.files(__package__) / "html_assets" / name).read_text(encoding="utf-8")


def json_for_script(value: object) -> str:
    """JSON to embed in a ``<script type="application/json">`` element: ``<``, ``>`` and
    ``&`` as ``\\u`` escapes (no span text can end the element or open a comment), every
    non-ASCII character escaped too (U+2028 and U+2029 included)."""
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# Nothing is fetched, whatever the page holds: no source but the page itself (plotly.js needs
# inline scripts and styles, and builds some functions at run time).
_CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'unsafe-inline'; img-src data:; font-src data:"
)

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>toolguard report</title>
<style>{css}</style>
</head>
<body>
<header><h1 id="title">toolguard report</h1><p id="grouping"></p></header>
<section id="compare-section" hidden>
<h2>Paired comparison</h2>
<p id="compare-head"></p>
<table id="compare-table"><thead><tr><th>metric</th><th>A</th><th>B</th><th>B - A</th>
<th>95% paired bootstrap interval</th><th>tasks</th></tr></thead><tbody></tbody></table>
<div id="fig-compare" class="figure" hidden></div>
</section>
<section>
<h2>Prefix executability by group</h2>
<p class="note">95% intervals: Wilson for TER, RR, S and final success; a seeded bootstrap over
trajectories for mean FED and AUC-PEC. Click a column to sort.</p>
<table id="groups"><thead></thead><tbody></tbody></table>
</section>
<section class="figures">
<div id="fig-pec" class="figure"></div>
<div id="fig-causes" class="figure"></div>
<div id="fig-decomposition" class="figure"></div>
</section>
<section id="warnings-section"><h2>Warnings</h2><ul id="warnings"></ul></section>
<section id="trajectories-section">
<h2>Trajectories</h2>
<div id="trajectory-controls">
<label>group <select id="filter-group"><option value="">all</option></select></label>
<label>first-error cause <select id="filter-cause"><option value="">all</option></select></label>
<label>tool <select id="filter-tool"><option value="">all</option></select></label>
<button id="filter-clear" type="button">clear filters</button>
<span id="trajectory-count"></span>
</div>
<p class="note">The first failing call of each trajectory: its tool, the failed check and the
developer message. Argument values and results appear only where the spans recorded them
(record_content=True), cut short.</p>
<table id="trajectories"><thead></thead><tbody></tbody></table>
</section>
<script type="application/json" id="toolguard-data">{data}</script>
<script>{plotly}</script>
<script>{app}</script>
</body>
</html>
"""

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; margin: 0; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: right; white-space: pre; }
th:first-child, td:first-child, #trajectories td { text-align: left; }
#trajectories td { white-space: pre-wrap; max-width: 40em; overflow-wrap: break-word; }
th.sortable { cursor: pointer; user-select: none; background: #f4f4f4; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
tr.overall { font-weight: 600; border-top: 2px solid #999; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; }
.figure { flex: 1 1 520px; min-width: 420px; height: 460px; }
#fig-pec { flex-basis: 100%; height: 500px; }
.note { color: #555; font-size: 0.92em; }
#trajectory-controls { margin: 0.5em 0; display: flex; gap: 1em; flex-wrap: wrap; }
#warnings li { white-space: pre-wrap; overflow-wrap: anywhere; }
"""


def render_html(
    report: Report,
    records: Sequence[TrajectoryRecord] | None = None,
    *,
    by: Sequence[str] = (),
    title: str = "toolguard report",
    comparison: Comparison | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> str:
    """The page for ``report``; with the ``records`` it was built from, also the trajectory
    table (at most ``max_rows`` rows); with a ``comparison`` (report/compare.py), the paired
    differences first. Raises HtmlUnavailable without plotly."""
    if max_rows < 0:
        raise ValueError(f"max_rows must be >= 0, got {max_rows}")
    plotly = _plotly_js()
    data = page_data(report, records, by, title=title, comparison=comparison, max_rows=max_rows)
    return _TEMPLATE.format(
        csp=_CSP, css=_CSS, data=json_for_script(data), plotly=plotly, app=_asset("report.js")
    )
