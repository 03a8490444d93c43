"""Which trajectory an agent run is: the user's, or one the adapter opens for the run."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias

import toolguard as tg
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelRequest, UserPromptPart

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
    The run's prompt, and the user's prompts of the earlier turns (``message_history``),
    are what the agent has seen (the information check), in any of them.
    """
    traj, owned = _choose(guard, ctx, source, trajectory_id, labels)
    if observe_prompt:
        for text in _user_texts(ctx):
            traj.observe(text)
    return traj, owned


def _user_texts(ctx: RunContext[Any]) -> Iterator[str]:
    yield from _texts(ctx.prompt)
    # What the user said in earlier turns is as much the agent's to use as this prompt: an
    # address given in turn 1 is not a guess when the model sends it in turn 2. (The tool
    # returns of those turns are seen too, bound with the history.)
    for message in ctx.messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    yield from _texts(part.content)


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
