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
    the invocation's id (:func:`default_id`) and the session's id as its conversation id.
    """
    given = source(ctx) if callable(source) else source
    return tg.run_trajectory(
        given,
        lambda: guard.trajectory(
            trajectory_id(ctx) if trajectory_id is not None else default_id(ctx),
            labels=labels(ctx) if callable(labels) else labels,
            conversation_id=ctx.session.id,
        ),
    )


def default_id(ctx: InvocationContext) -> str:
    """The invocation's id; for a run that resumes it (a message answering a paused
    long-running call, which ADK gives that call's invocation id), ``<id>#<n>``, n counting
    the client's messages of that invocation in the session; for a run that resumes it
    without a message (a resumable app's ``run_async(invocation_id=...)`` after an
    interrupted run), that id ``+<k>``, k counting the invocation's events since that
    message. Each run is a trajectory of its own, and two summaries under one id would be
    read as one trajectory by the report. Read from the session, so every process names a
    run the same."""
    sent_here = 0
    since = 0  # the invocation's events after its last message: a run already went on
    for e in ctx.session.events:
        if e.invocation_id == ctx.invocation_id:
            if e.author == "user":
                sent_here += 1
                since = 0
            else:
                since += 1
    base = ctx.invocation_id if sent_here <= 1 else f"{ctx.invocation_id}#{sent_here}"
    return base if since == 0 else f"{base}+{since}"


def texts(content: types.Content | None) -> Iterator[str]:
    """The text parts of a message (what the information check counts as seen)."""
    if content is None or not content.parts:
        return
    for part in content.parts:
        if part.text:
            yield part.text


def responses(content: types.Content | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(tool name, response as ADK recorded it) for each function response of a message."""
    if content is None or not content.parts:
        return
    for part in content.parts:
        response = part.function_response
        if response is not None and response.name and isinstance(response.response, dict):
            yield response.name, response.response


def sent(ctx: InvocationContext) -> Iterator[tuple[str, dict[str, Any]]]:
    """The tool results the client sent for this invocation (a long-running tool's final
    result, ADK's documented pattern). ADK gives such a message the invocation id of the call
    it answers, and ``ctx.user_content`` is then that invocation's first message: the
    message is read in the session, where it is before the run starts."""
    yield from responses(ctx.user_content)
    for event in ctx.session.events:
        if event.invocation_id == ctx.invocation_id and event.author == "user":
            yield from responses(event.content)


def results_before(ctx: InvocationContext) -> Iterator[tuple[str, dict[str, Any]]]:
    """(tool name, response) for each tool result the session holds when the run starts: the
    model has them in its history, so the ids they hold are usable now (this invocation id's
    too: a message answering a paused call resumes the invocation of that call)."""
    for event in ctx.session.events:
        yield from responses(event.content)


def earlier_texts(ctx: InvocationContext) -> Iterator[str]:
    for event in ctx.session.events:
        if event.author == "user":
            yield from texts(event.content)


def unwrap(response: dict[str, Any], returns_dict: bool | None) -> Any:
    """The value the tool returned, from the response ADK recorded. ADK sends a return that
    is not a dict as ``{"result": value}`` and a dict as it is, so a response of that one key
    is ADK's wrapping unless the tool returns dicts (``returns_dict``, from its annotation) or
    the value inside is a dict (which ADK never wraps); with neither known it is taken as
    ADK's, the common case (a tool returning a list or a text)."""
    if response.keys() != {"result"} or returns_dict:
        return response
    inner = response["result"]
    if returns_dict is None and isinstance(inner, dict):
        return response
    return inner
