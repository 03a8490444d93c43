"""Which trajectory an agent run is: the user's, or one the adapter opens for the run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import toolguard as tg
from pydantic_ai import RunContext

TrajectorySource: TypeAlias = (
    "tg.Trajectory | Callable[[RunContext[Any]], tg.Trajectory | None] | None"
)
Labels: TypeAlias = "Mapping[str, Any] | Callable[[RunContext[Any]], Mapping[str, Any]] | None"
TrajectoryId: TypeAlias = "Callable[[RunContext[Any]], str | None] | None"


def begin(
    guard: tg.Guard,
    ctx: RunContext[Any],
    source: TrajectorySource,
    trajectory_id: TrajectoryId,
    labels: Labels,
    observe_prompt: bool,
) -> tuple[tg.Trajectory, bool]:
    """The run's trajectory and whether the adapter owns it (starts and ends it).

    In order: the one ``source`` gives (owned only if it was not started yet); the one
    current where the run started (``with guard.trajectory(...):`` around it); a new one,
    with the run's id and conversation id, whose summary goes to the guard's provider.
    The run's prompt is what the agent has seen (the information check), in any of them.
    """
    traj, owned = _choose(guard, ctx, source, trajectory_id, labels)
    if observe_prompt:
        for text in _texts(ctx.prompt):
            traj.observe(text)
    return traj, owned


def _choose(
    guard: tg.Guard,
    ctx: RunContext[Any],
    source: TrajectorySource,
    trajectory_id: TrajectoryId,
    labels: Labels,
) -> tuple[tg.Trajectory, bool]:
    given = source(ctx) if callable(source) else source
    return tg.run_trajectory(
        given,
        lambda: guard.trajectory(
            trajectory_id(ctx) if trajectory_id is not None else ctx.run_id,
            labels=labels(ctx) if callable(labels) else labels,
            conversation_id=ctx.conversation_id,
        ),
    )


def _texts(prompt: str | Sequence[Any] | None) -> list[str]:
    # The information check's "seen" set: the text of the user's prompt (files and images
    # carry no values the model could quote).
    if prompt is None:
        return []
    if isinstance(prompt, str):
        return [prompt]
    return [p for p in prompt if isinstance(p, str)]
