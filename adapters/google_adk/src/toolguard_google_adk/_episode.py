"""Which trajectory an ADK invocation is, and what the session's earlier turns showed it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeAlias

import toolguard as tg
from google.adk.agents.invocation_context import InvocationContext
from google.genai import types

TrajectorySource: TypeAlias = (
    "tg.Trajectory | Callable[[InvocationContext], tg.Trajectory | None] | None"
)
Labels: TypeAlias = "Mapping[str, Any] | Callable[[InvocationContext], Mapping[str, Any]] | None"
TrajectoryId: TypeAlias = "Callable[[InvocationContext], str | None] | None"


def choose(
    guard: tg.Guard,
    ctx: InvocationContext,
    source: TrajectorySource,
    trajectory_id: TrajectoryId,
    labels: Labels,
) -> tuple[tg.Trajectory, bool]:
    """The invocation's trajectory and whether the plugin owns it (starts and ends it).

    In order: the one ``source`` gives (owned only if it was not started yet); the one
    current where the run started (``with guard.trajectory(...):`` around it); a new one, with
    the invocation's id and the session's id as its conversation id.
    """
    given = source(ctx) if callable(source) else source
    return tg.run_trajectory(
        given,
        lambda: guard.trajectory(
            trajectory_id(ctx) if trajectory_id is not None else ctx.invocation_id,
            labels=labels(ctx) if callable(labels) else labels,
            conversation_id=ctx.session.id,
        ),
    )


def texts(content: types.Content | None) -> Iterator[str]:
    """The text parts of a message (what the information check counts as seen)."""
    if content is None or not content.parts:
        return
    for part in content.parts:
        if part.text:
            yield part.text


def earlier_results(ctx: InvocationContext) -> Iterator[tuple[str, Any]]:
    """(tool name, result) for each tool result the session's earlier invocations got back:
    the model has them in its history, so the ids they hold are usable in this one."""
    for event in ctx.session.events:
        if event.invocation_id == ctx.invocation_id:
            continue
        for response in event.get_function_responses():
            if response.name and isinstance(response.response, dict):
                yield response.name, unwrap(response.response)


def earlier_texts(ctx: InvocationContext) -> Iterator[str]:
    for event in ctx.session.events:
        if event.invocation_id != ctx.invocation_id and event.author == "user":
            yield from texts(event.content)


def unwrap(response: dict[str, Any]) -> Any:
    # ADK sends a result that is not a dict to the model as {"result": value}.
    return response["result"] if len(response) == 1 and "result" in response else response
