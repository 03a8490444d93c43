"""A span file for the HTML report's tests: three groups (one label is hostile markup), every
cause, tools, checks and messages, some of them hostile too; with the counts the page must show.

A module of its own, shared by test_html.py and test_html_browser.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spanfiles import call, export, summary

from toolguard import _contract as A

# Each would run script, break out of an attribute or the data element, or print as something
# else than it is, if it were ever put in the page as markup.
HOSTILE_LABEL = "<script>window.__pwned = 1</script>\"'><b>bold</b>\x1b[31m"
HOSTILE_TOOL = '<img src=x onerror="window.__pwned = 2">'
HOSTILE_MESSAGE = "</script><script>window.__pwned = 3</script> & <!-- \u2028 end"
CAUSES = ("schema", "dependency", "precondition", "state_consistency", "information")


@dataclass
class Cohort:
    lines: list[dict[str, Any]] = field(default_factory=list)
    n: int = 0
    groups: dict[str, int] = field(default_factory=dict)  # model label -> trajectories
    by_cause: dict[str, int] = field(default_factory=dict)  # first-error cause -> trajectories
    by_group_cause: dict[tuple[str, str], int] = field(default_factory=dict)
    executable: int = 0


def cohort(per_group: int = 12) -> Cohort:
    """``per_group`` trajectories for each of three models; trajectory i of a group breaks at
    step 2 with cause ``CAUSES[i % 6]`` (i % 6 == 5: it never breaks)."""
    c = Cohort()
    for model in ("alpha", "beta", HOSTILE_LABEL):
        for i in range(per_group):
            tid = f"{'h' if model == HOSTILE_LABEL else model}-{i:03d}"
            labels = {"model": model, "task": f"t{i}"}
            k = i % 6
            tool = HOSTILE_TOOL if model == HOSTILE_LABEL else f"tool_{k}"
            spans = [call(tid, 1, True)]
            if k < 5:
                cause = CAUSES[k]
                bad = call(tid, 2, False, cause)
                bad["attributes"] += [
                    {"key": A.GEN_AI_TOOL_NAME, "value": {"stringValue": tool}},
                    {"key": A.CHECK, "value": {"stringValue": f"{cause}.check_{k}"}},
                    {"key": A.MESSAGE, "value": {"stringValue": HOSTILE_MESSAGE
                                                 if model == HOSTILE_LABEL else f"bad {k}"}},
                ]  # fmt: skip
                spans += [bad, call(tid, 3, True), summary(tid, 3, 2, cause, i % 2 == 0, labels)]
                c.by_cause[cause] = c.by_cause.get(cause, 0) + 1
                c.by_group_cause[(model, cause)] = c.by_group_cause.get((model, cause), 0) + 1
            else:
                spans += [call(tid, 2, True), summary(tid, 2, 3, None, True, labels)]
                c.executable += 1
            c.lines.append(export(*spans))
            c.n += 1
            c.groups[model] = c.groups.get(model, 0) + 1
    return c
