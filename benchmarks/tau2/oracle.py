"""Oracle replay on the raw tau2 environment: which calls it rejects, and the final DB hash.

Each call goes through ``Environment.get_response`` exactly as tau2's orchestrator sends an
agent's tool call: tools raise ``ValueError`` and tau2 turns that into a ToolMessage with
``error=True``. The final state is compared with tau2's own ``get_db_hash``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.tau2._tau2 import fresh_environment, tool_call
from benchmarks.tau2.tasks import Call


@dataclass(frozen=True)
class StepResult:
    name: str
    rejected: bool
    content: str  # tau2's ToolMessage content ("Error: ..." when rejected)


@dataclass(frozen=True)
class Replay:
    steps: tuple[StepResult, ...]
    db_hash: str | None  # None when not asked for and the replay was rejected anyway

    @property
    def fed(self) -> int:
        """First step the environment rejected; T + 1 when it rejected none."""
        for i, s in enumerate(self.steps, start=1):
            if s.rejected:
                return i
        return len(self.steps) + 1

    @property
    def n_rejected(self) -> int:
        return sum(s.rejected for s in self.steps)


def replay(domain: str, calls: Sequence[Call], *, always_hash: bool = True) -> Replay:
    """Run ``calls`` on a fresh environment. Hashing the airline DB costs ~0.4 s, so with
    ``always_hash=False`` it is skipped when a rejection already decides the verdict."""
    env = fresh_environment(domain)
    steps = []
    for i, c in enumerate(calls, start=1):
        msg = env.get_response(tool_call(c.name, c.arguments, f"call-{i}"))
        steps.append(StepResult(c.name, bool(msg.error), msg.content))
    rejected = any(s.rejected for s in steps)
    return Replay(tuple(steps), env.get_db_hash() if always_hash or not rejected else None)


def parse_content(content: str) -> Any:
    """A ToolMessage's content as data (tau2 JSON-encodes models; plain strings stay)."""
    try:
        return json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return content
