"""``--explain``: the table of sources per (tool, argument path), counts only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from .flow import Flow, Leaf, Place


def explain(flow: Flow) -> str:
    """One row per (tool, argument path): its values, how many are too common to count, and
    of the others how many appeared first in a result or the environment's initial state
    (the commonest place named; the state's as ``(initial state): PLACE``), as a
    value the user gave, in the user's or system's text, in an earlier call's arguments, or
    nowhere. A value may have more than one source."""
    header = (
        "tool",
        "argument",
        "values",
        "common",
        "result",
        "top place",
        "user",
        "text",
        "args",
        "nowhere",
    )
    rows = [header]
    for (tool, path), tally in sorted(flow.leaves.items()):
        rare = {leaf: n for leaf, n in tally.counts.items() if not leaf.common}
        places: Counter[Place] = Counter()
        for leaf, n in rare.items():
            for p in leaf.producers:
                places[p] += n
        top = min(places, key=lambda p: (-places[p], p)) if places else None
        total = tally.total()

        def rare_with(test: Callable[[Leaf], bool], rare: dict[Leaf, int] = rare) -> str:
            return str(sum(n for leaf, n in rare.items() if test(leaf)))

        rows.append(
            (
                tool,
                path,
                str(total),
                str(total - sum(rare.values())),
                rare_with(lambda leaf: bool(leaf.producers)),
                f"{top[0]}: {top[1]} ({places[top]})" if top else "-",
                rare_with(lambda leaf: leaf.user_given),
                rare_with(lambda leaf: leaf.said),
                rare_with(lambda leaf: leaf.in_arguments),
                rare_with(
                    lambda leaf: (
                        not (leaf.producers or leaf.user_given or leaf.said or leaf.in_arguments)
                    )
                ),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return (
        "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        )
        + "\n"
    )
