"""What a top-level argument took over the accepted calls, for comments only: a few distinct
strings (an enum the schema does not list) or numbers (a range the schema does not give).

Never a rule: a value not seen is not a value the tool refuses. Memory is bounded: past
``MAX_ENUM`` distinct strings an argument's set is dropped (it is no enum), and trajectories
are counted, not kept. The values are
the user's data, so the comment names them only with ``--show-values``; a range's ends are
two recorded values, so they follow the same rule (without it the comment says a range was
seen and over how many values).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_ENUM = 8  # more distinct strings than this is no enum
MAX_EXAMPLE = 120  # characters of one value shown with --show-values


def cut_example(text: str) -> str:
    """A value's repr for a comment, cut: a recorded 200 KB string made one comment line
    of the contract 600 KB long."""
    return text if len(text) <= MAX_EXAMPLE else f"{text[: MAX_EXAMPLE - 3]}..."


@dataclass(slots=True)
class Domain:
    calls: int = 0
    strings: int = 0
    numbers: int = 0
    distinct: set[str] | None = field(default_factory=set)  # None: more than MAX_ENUM
    low: float | None = None
    high: float | None = None
    runs: int = 0  # trajectories (a run's calls are read together: a new id is a new one)
    last_run: str = ""
    schema_enum: bool = False
    schema_range: bool = False

    def add(self, value: Any, run: str) -> None:
        self.calls += 1
        if run != self.last_run:
            self.runs += 1
            self.last_run = run
        if isinstance(value, bool):
            return
        if isinstance(value, str):
            self.strings += 1
            if self.distinct is not None:
                self.distinct.add(value)
                if len(self.distinct) > MAX_ENUM:
                    self.distinct = None
        elif isinstance(value, int | float):
            self.numbers += 1
            self.low = value if self.low is None else min(self.low, value)
            self.high = value if self.high is None else max(self.high, value)

    def says(self, prop: Any) -> None:
        """What the run's schema of this argument already says."""
        if isinstance(prop, Mapping):
            self.schema_enum |= "enum" in prop or "const" in prop
            self.schema_range |= any(
                k in prop for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
            )


def comments(path: str, domain: Domain, *, min_support: int, show_values: bool) -> list[str]:
    """The comment lines for one argument (none when there is nothing the schema omits)."""
    if domain.runs < min_support:
        return []
    out: list[str] = []
    where = f"{domain.calls} calls, {domain.runs} trajectories"
    few = domain.distinct
    if (
        not domain.schema_enum
        and domain.strings == domain.calls
        and few is not None
        and 2 * len(few) <= domain.calls
    ):
        text = f"# seen {path}: {len(few)} distinct strings in {where} (the schema lists no enum)"
        if show_values:
            text += ": " + ", ".join(cut_example(repr(v)) for v in sorted(few))
        out.append(text)
    if not domain.schema_range and domain.numbers == domain.calls and domain.calls:
        text = f"# seen {path}: numbers in {where} (the schema gives no range)"
        if show_values:
            text += f": from {domain.low!r} to {domain.high!r}"
        out.append(text)
    return out
