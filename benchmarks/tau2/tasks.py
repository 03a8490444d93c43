"""Ground-truth tasks: the assistant-side tool actions of each tau2 task, plus the user's text.

Read through tau2's own ``get_tasks`` (pydantic-validated ``tasks.json``). Every action in
airline and retail is requested by the assistant; user-side actions (``requestor == "user"``,
used by telecom) are skipped and counted, because the guard sits in front of the agent only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.tau2._tau2 import DOMAINS, domain_api


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class GroundTruth:
    domain: str
    task_id: str
    user_text: str  # everything the user simulator knows: the agent can learn only this
    calls: tuple[Call, ...]
    skipped_user_actions: int = 0

    @property
    def key(self) -> str:
        return f"tau2-{self.domain}-{self.task_id}"


def load_tasks(domain: str, limit: int | None = None) -> list[GroundTruth]:
    """All tasks of the domain (tau2's full task set, not only the "base" split)."""
    out: list[GroundTruth] = []
    for task in domain_api(domain).get_tasks(None):
        actions = task.evaluation_criteria.actions if task.evaluation_criteria else None
        actions = actions or []
        calls = tuple(
            Call(a.name, dict(a.arguments)) for a in actions if a.requestor == "assistant"
        )
        out.append(
            GroundTruth(
                domain=domain,
                task_id=str(task.id),
                user_text=str(task.user_scenario),
                calls=calls,
                skipped_user_actions=len(actions) - len(calls),
            )
        )
        if limit is not None and len(out) >= limit:
            break
    return out


def load_all(limit_per_domain: int | None = None) -> list[GroundTruth]:
    return [t for d in DOMAINS for t in load_tasks(d, limit_per_domain)]
