"""``--explain``: the table of sources per (tool, argument path), counts only."""

from __future__ import annotations

from collections import Counter

from .flow import Flow


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
    for (tool, path), leaves in sorted(flow.leaves.items()):
        rare = [leaf for leaf in leaves if not leaf.common]
        places = Counter(p for leaf in rare for p in leaf.producers)
        top = min(places, key=lambda p: (-places[p], p)) if places else None
        rows.append(
            (
                tool,
                path,
                str(len(leaves)),
                str(len(leaves) - len(rare)),
                str(sum(1 for leaf in rare if leaf.producers)),
                f"{top[0]}: {top[1]} ({places[top]})" if top else "-",
                str(sum(1 for leaf in rare if leaf.user_given)),
                str(sum(1 for leaf in rare if leaf.said)),
                str(sum(1 for leaf in rare if leaf.in_arguments)),
                str(
                    sum(
                        1
                        for leaf in rare
                        if not (leaf.producers or leaf.user_given or leaf.said or leaf.in_arguments)
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
