"""One proposed rule and its evidence, whatever proposed it."""

from __future__ import annotations

from dataclasses import dataclass, field

from .evidence import MAX_COUNTEREXAMPLES
from .flow import Place

__all__ = ["MAX_COUNTEREXAMPLES", "Proposal"]


@dataclass
class Proposal:
    """One rule: ``what`` is "refs", "grounded" or "invalidates"; ``kind`` and ``places``
    for refs and invalidates; ``detail``: what the evidence was, for the comment."""

    what: str
    tool: str
    path: str
    support: int  # trajectories holding evidence
    passed: int
    total: int
    counterexamples: list[str]
    failing_runs: int
    places: tuple[Place, ...] = ()
    kind: str = ""
    examples: list[str] = field(default_factory=list)
    detail: str = ""
    distinct: int = 0  # distinct values among the evidence
    joined: tuple[Place, ...] = ()  # places the place closure added (closure.py)

    @property
    def share(self) -> float:
        return self.passed / self.total if self.total else 0.0
