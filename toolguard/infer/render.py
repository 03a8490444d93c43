"""The proposals as a contract file (toolguard/runtime/contract_file.py's format), sorted
and byte-for-byte the same for the same evidence.

Every rule is one line (TOML dotted keys: ``refs."arg" = "kind"``, ``invalidates."arg" =
"kind"``) under a comment with its
support (trajectories), share (values passing / values) and up to three counterexample
trajectory ids. The file is in log mode: an inferred rule flags, a reviewer decides to
block. Recorded values appear only with ``show_values`` (as comments). Each tool's table
ends with what its top-level arguments took where the schema does not say (a few distinct
strings, numbers: ``domains.py``), as comments, never rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from .._printable import printable
from .domains import comments, cut_example
from .flow import Flow
from .holders import MAX_DISTINCT
from .propose import Proposal
from .values import INITIAL


def _line(text: str) -> str:
    # Tool and argument names, trajectory ids and warnings come from the recording: a
    # newline in one would end its comment and make the rest of it keys of the contract, and
    # TOML refuses any other control character in a comment. Keys are JSON-escaped already
    # (``_q``), so escaping every line only touches the comments.
    return printable(text)


def _q(text: str) -> str:
    # A JSON string with ASCII escapes is a TOML basic string.
    return json.dumps(text, ensure_ascii=True)


def _evidence(rule: Proposal) -> str:
    text = (
        f"support {rule.support} trajectories and {rule.distinct} distinct values, "
        f"share {rule.share:.4f} "
        f"({rule.passed}/{rule.total} values)"
    )
    if rule.counterexamples:
        more = rule.failing_runs - len(rule.counterexamples)
        text += f"; counterexamples: {', '.join(rule.counterexamples)}"
        if more > 0:
            text += f" (+{more} more)"
    return text


def _joined(flow: Flow, place: tuple[str, str], joined: set[tuple[str, str]]) -> str:
    if place not in joined:
        return ""
    holder = flow.holders[place]
    distinct = len(holder.distinct)
    more = "+" if distinct >= MAX_DISTINCT else ""  # the count stops there
    return (
        f"; joined by value containment: held only this kind's values, in {holder.runs} "
        f"trajectories, {distinct}{more} distinct values"
    )


def render(
    proposals: Iterable[Proposal],
    flow: Flow,
    *,
    min_support: int,
    min_share: float,
    min_distinct: int = 5,
    show_values: bool = False,
) -> str:
    """The contract file's text."""
    rules = list(proposals)
    accepted = sum(c.accepted for c in flow.tools.values())
    lines = [
        "# Inferred by `toolguard infer` from "
        f"{flow.runs} trajectories ({accepted} accepted calls); "
        f"min-support {min_support}, min-distinct {min_distinct}, min-share {min_share:g}.",
        "# Review every rule before relying on it; a rule's comment gives its evidence.",
        *(f"# warning: {warning}" for warning in flow.warnings),
        'mode = "log"',
    ]
    by_tool: dict[str, list[str]] = {}
    for rule in sorted(rules, key=lambda r: (r.tool, r.what, r.path)):
        out = by_tool.setdefault(rule.tool, [])
        if rule.what == "refs":
            sources = ", ".join(f"{t}: {p}" for t, p in rule.places)
            out.append(f"# refs {rule.path} <- {rule.kind} ({sources}): {_evidence(rule)}")
            if show_values and rule.examples:
                out.append(f"# values seen: {', '.join(map(cut_example, rule.examples))}")
            out.append(f"refs.{_q(rule.path)} = {_q(rule.kind)}")
        elif rule.what == "invalidates":
            out.append(
                f"# invalidates {rule.path} -> {rule.kind} ({rule.detail}): {_evidence(rule)}"
            )
            out.append(f"invalidates.{_q(rule.path)} = {_q(rule.kind)}")
    grounded: dict[str, list[Proposal]] = {}
    for rule in rules:
        if rule.what == "grounded":
            grounded.setdefault(rule.tool, []).append(rule)
    for tool, items in grounded.items():
        out = by_tool.setdefault(tool, [])
        for rule in sorted(items, key=lambda r: r.path):
            out.append(f"# grounded {rule.path}: {_evidence(rule)}")
            if show_values and rule.examples:
                out.append(f"# values seen: {', '.join(map(cut_example, rule.examples))}")
        names = ", ".join(_q(r.path) for r in sorted(items, key=lambda r: r.path))
        out.append(f"grounded = [{names}]")
    producers: dict[str, dict[str, tuple[str, list[str]]]] = {}
    joined = {place for rule in rules for place in rule.joined}
    for rule in rules:
        if rule.what != "refs":
            continue
        for tool, place in rule.places:
            kind, users = producers.setdefault(tool, {}).setdefault(place, (rule.kind, []))
            users.append(f"{rule.tool}.{rule.path}")
    initial = producers.pop(INITIAL, {})
    if initial:
        # Top-level keys precede the first [tools.*] table; the initial state's places are
        # one table of their own (contract_file.py's [initial]).
        lines += ["", "[initial]"]
        for place in sorted(initial):
            kind, users = initial[place]
            lines.append(
                f"# {kind} for {', '.join(sorted(set(users)))}: values the environment's "
                f"initial state held{_joined(flow, (INITIAL, place), joined)}"
            )
            lines.append(f"{_q(place)} = {_q(kind)}")
    for tool, places in producers.items():
        out = by_tool.setdefault(tool, [])
        for place in sorted(places):
            kind, users = places[place]
            out.append(
                f"# produces {kind} for {', '.join(sorted(set(users)))}"
                + _joined(flow, (tool, place), joined)
            )
            out.append(f"produces.{_q(place)} = {_q(kind)}")
    seen: dict[str, list[str]] = {}
    for (tool, path), domain in sorted(flow.domains.items()):
        found = comments(path, domain, min_support=min_support, show_values=show_values)
        if found:
            seen.setdefault(tool, []).extend(found)
    for tool in sorted(by_tool):
        lines.append("")
        lines.append(f"[tools.{_q(tool)}]")
        lines.extend(by_tool[tool])
        lines.extend(seen.pop(tool, []))
    if seen:
        # Under no table: a table of comments alone would declare the tool in a replay.
        lines += ["", "# Tools with no rule: what their arguments took (comments only)"]
        for tool in sorted(seen):
            lines.append(f"# {tool}:")
            lines.extend(seen[tool])
    return "\n".join(map(_line, lines)) + "\n"
