"""A recorded run once read, the same for every format: what the agent was told, and each
model turn's tool calls with the environment's recorded answers."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import ToolGuardError


class ReplayInputError(ToolGuardError, ValueError):
    """Recorded runs that cannot be read: the message names the file and line (or the file
    and the run's index) and what was wrong."""


# Which format a value read under another one looks like, for the error that refuses it:
# `toolguard replay openai` given a tau2 results file says to give `tau2`, not only which key
# is missing (mixed formats in one call are the common mistake).
def looks_like(value: Any) -> str | None:
    """The format whose top-level value ``value`` looks like, or None: ``openai`` (a run with
    messages), ``tau2`` (a results document), ``bfcl`` (a result line), ``spans`` (an OTLP
    trace export)."""
    if not isinstance(value, Mapping):
        return None
    if "resourceSpans" in value:
        return "spans"
    if "simulations" in value:
        return "tau2"
    if isinstance(value.get("id"), str) and "result" in value:
        return "bfcl"
    if "messages" in value or "traj" in value:
        return "openai"
    return None


def format_hint(value: Any, current: str) -> str:
    """``"; it looks like ... "`` naming the format ``value`` looks like, when it is not
    ``current``; else ``""``."""
    other = looks_like(value)
    if other is None or other == current:
        return ""
    if other == "spans":
        return (
            "; it looks like a span file (OTLP JSON): `toolguard report` reads it, "
            "`toolguard infer --format spans` infers from it"
        )
    return f"; it looks like the {other} format (give each format's files to their own call)"


def json_lines_hint(path: str) -> str:
    """``"; ..."`` when the JSON Lines file ``path`` starts with a line of a lone ``{`` or
    ``[`` (one JSON document written over several lines: a tau2 results file, say), else
    ``""``. Reads its first bytes only."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:  # stdin, or gone: no hint
        return ""
    first = next((line.strip() for line in head.splitlines() if line.strip()), b"")
    if first not in (b"{", b"["):
        return ""
    return (
        "; the file is one JSON document over several lines, not JSON Lines (one entry per "
        "line): another format's file?"
    )


class ReplayMemoryError(ToolGuardError, MemoryError):
    """Memory ran out while reading recorded runs: not a fault of the input, so never
    reported as one (nor skipped by ``skip_invalid``). The message names the file and line
    being read; a :class:`MemoryError`, so ``except MemoryError`` still catches it."""


@dataclass(frozen=True, slots=True)
class Answer:
    """The environment's answer to one call: the result the agent saw, and whether the
    environment said the call failed."""

    result: Any
    error: bool


@dataclass(slots=True)
class RecordedCall:
    """One tool call as the model emitted it. ``arguments``: a mapping, or the model's JSON
    text as recorded (text that does not parse fails the schema check: it could not have
    run). ``answer``: the recorded answer; None when the log holds none (the call is then
    counted, and closed as cancelled) or when a live environment computes it."""

    name: str
    arguments: Any
    call_id: str | None = None
    answer: Answer | None = None


@dataclass(slots=True)
class Turn:
    """One model message's tool calls, in the order the model emitted them."""

    calls: list[RecordedCall]


@dataclass(slots=True)
class Said:
    """Text the agent was given (a user or system message): what the information check may
    find grounded arguments in."""

    text: str


Event = Turn | Said
Executor = Callable[[RecordedCall], Answer]
"""A live environment: runs a call and returns its answer (BFCL's backends)."""


class LiveEnvironment:
    """A live environment of objects whose methods are the tools (BFCL's backends): it
    answers a call itself (the ``environment`` cohort), and a guard can also run the calls
    on its objects (``owners``: tool name -> (object, method name)), which a contract's
    predicates over the live state and a dry run need. ``error_result`` reads a method's
    own rejection marker in its result."""

    def __init__(
        self, owners: Mapping[str, tuple[Any, str]], error_result: Callable[[Any], bool]
    ) -> None:
        self.owners = dict(owners)
        self.error_result = error_result

    def __call__(self, call: RecordedCall) -> Answer:
        owner = self.owners.get(call.name)
        if owner is None:  # BFCL's eval of an unknown name raises NameError
            return Answer(f"Error during execution: name {call.name!r} is not defined", True)
        arguments = call.arguments if isinstance(call.arguments, Mapping) else {}
        try:
            # Fresh argument objects per call, as BFCL's eval builds them: backends keep
            # references to list arguments and later calls would mutate them.
            result = getattr(owner[0], owner[1])(**copy.deepcopy(dict(arguments)))
        except Exception as exc:  # the environment's own rejection of an ill-formed call
            return Answer(f"Error during execution: {exc}", True)
        return Answer(result, self.error_result(result))


@dataclass(slots=True)
class RecordedRun:
    """One recorded agent episode.

    ``id`` is unique within one replay; ``task`` names the task (runs of one task pair up in
    ``toolguard compare``); ``success`` is the recorded outcome (None: unknown). ``tools``:
    the offered tools and their parameter schemas, when the format records them (a call of
    any other tool is then unknown to a contract replay). ``environment``: a factory of a
    fresh live environment, for formats whose files hold no answers. ``null_as_default``:
    whether a contract replay accepts ``null`` for an optional argument with a default where
    the contract file does not say (the format's backends take it: BFCL's, tau2's).
    ``initial``: the environment's initial state as data, where the format gives it (BFCL's
    ``initial_config`` with the backends' defaults, by class); a contract's ``[initial]``
    places read it."""

    id: str
    events: list[Event]
    where: str
    success: bool | None = None
    task: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    tools: Mapping[str, Mapping[str, Any] | None] | None = None
    environment: Callable[[], Executor] | None = None
    null_as_default: bool = False
    initial: Any = None

    def calls(self) -> Iterator[RecordedCall]:
        for event in self.events:
            if isinstance(event, Turn):
                yield from event.calls

    @property
    def length(self) -> int:
        """T: the number of tool calls the agent emitted."""
        return sum(len(e.calls) for e in self.events if isinstance(e, Turn))
