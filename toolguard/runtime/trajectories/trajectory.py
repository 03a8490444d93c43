"""Trajectories: step numbering, bound variables, what the agent has seen, the summary span.

Which trajectory is current in a context (a ContextVar), and how many are open: current.py.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import Token
from types import TracebackType
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Span, Tracer

from ... import _contract as contract
from ..._errors import UsageError
from ..telemetry import spans as tel
from ..tools.error_result import default_error_result
from ..verdict import NAME_LIMIT, Failure, Verdict, shorten_text
from . import at_exit
from .bindings import Binding, Bindings
from .current import count_open, current_var
from .leaves import add_leaves
from .registry import TrajectoryRegistry
from .seen import SeenTexts

logger = logging.getLogger("toolguard")


class Trajectory:
    """One agent episode. Use as ``with toolguard.trajectory(...) as traj:`` (or ``async with``).

    Set ``traj.success`` (True/False) when the outcome is known; leave it None otherwise.
    """

    def __init__(
        self,
        id: str | None = None,
        *,
        labels: Mapping[str, Any] | None = None,
        user_input: str | Iterable[str] | None = None,
        conversation_id: str | None = None,
        tracer: Tracer | None = None,
        registry: TrajectoryRegistry | None = None,
        key: str | None = None,
        summary: bool = True,
        tracer_provider: Any = None,
    ) -> None:
        if id is not None and not isinstance(id, str):
            raise UsageError(f"a trajectory id must be a string, got {type(id).__name__}")
        self.id = id if id is not None else uuid.uuid4().hex
        self.labels = {str(k): str(v) for k, v in (labels or {}).items()}
        self.conversation_id = conversation_id
        self.success: bool | None = None
        self._tracer = tracer or tel.get_tracer(tracer_provider)
        # The provider the summary goes to (None: the global one), compared with each
        # calling guard's: a mismatch splits a trajectory's spans between two backends.
        self._provider = tracer_provider
        self._provider_warned = False
        self._at_exit = False  # waiting to be ended at interpreter exit (tg.end_at_exit)
        self._length = 0  # the largest step taken: the next free one is one more
        self._lock = threading.Lock()
        self._first_error: tuple[int, str] | None = None
        # In emission order only when calls finish in it; sort by step for parallel calls.
        self._verdicts: list[tuple[int, str, str, list[Failure], str | None]] = []
        self._bindings = Bindings()
        self._seen: set[str] = set()
        self._seen_texts = SeenTexts()
        self._texts: list[str] = self._seen_texts.texts  # the free texts, in order
        self._reserved: dict[str, int] = {}
        # True: the record lives in a shared store (shared.py) and a call's step comes from
        # it (calls/call.py asks this; False keeps the in-memory path as it was).
        self._shared = False
        self._span: Any = None
        self._span_token: object | None = None
        # The context `with` made current with the summary span: a call started in it knows
        # its current span without looking it up (telemetry's start_call_span).
        self._span_context: Context | None = None
        self._var_token: Token[Trajectory | None] | None = None
        self._started = False
        self.ended = False
        self.last_active = time.monotonic()
        self._registry: TrajectoryRegistry | None = None
        self._key: str | None = None
        self._join = (registry, key) if registry is not None and key is not None else None
        # False: another process owns this trajectory's summary (a proxy continuing a host's
        # trajectory), so this one writes call spans only; two summaries would disagree.
        self.writes_summary = summary
        if user_input is not None:
            for text in [user_input] if isinstance(user_input, str) else user_input:
                self.observe(text)

    # -- steps and verdicts ------------------------------------------------------------------
    def next_step(self) -> int:
        """Take the next step number (emission order)."""
        with self._lock:
            self._length += 1
            return self._length

    def reserve(self, call_ids: Iterable[str] | Mapping[str, int]) -> list[int]:
        """Reserve steps for one model turn's calls, in the order the model emitted them.

        A later check carrying one of these ``call_id``s takes its reserved step, whatever
        order the framework starts or finishes the calls in. A mapping ``{call_id: step}``
        reserves the steps another process assigned (a host that sent them in MCP ``_meta``).
        Returns the steps.
        """
        given = dict(call_ids) if isinstance(call_ids, Mapping) else None
        ids = list(call_ids)
        for call_id in ids:
            if not isinstance(call_id, str):
                raise UsageError(f"reserve() takes call ids (strings), got {call_id!r}")
        if given is not None:
            for call_id, step in given.items():
                if isinstance(step, bool) or not isinstance(step, int) or step < 1:
                    raise UsageError(f"reserve(): the step of {call_id!r} must be an int >= 1")
        with self._lock:
            steps = []
            for call_id in ids:
                step = self._reserved.get(call_id)
                if given is not None:
                    step = given[call_id]
                    self._length = max(self._length, step)
                    self._reserved[call_id] = step
                elif step is None:  # reserving the same id twice keeps its first step
                    self._length += 1
                    step = self._length
                    self._reserved[call_id] = step
                steps.append(step)
        return steps

    def _take_step(self, call_id: str | None) -> int:
        """The step a call takes: the one reserved for its id, else the next free one."""
        if call_id is not None and self._reserved:
            with self._lock:
                step = self._reserved.pop(call_id, None)
            if step is not None:
                return step
        with self._lock:
            self._length += 1
            return self._length

    def _begin(
        self, call_id: str | None, fail_open: bool, tool: Any = None, observes: bool = False
    ) -> tuple[int, Failure | None]:
        """A call's step, and the failure of a store that did not answer: a trajectory kept
        in a shared store overrides this (shared.py: ``tool`` and ``observes`` say whether
        the call may write); in memory nothing can fail."""
        return self._take_step(call_id), None

    def _record(
        self, step: int, tool: str, decision: str, failures: list[Failure], call_id: str | None
    ) -> None:
        """Keep one call's verdict; `failures` in precedence order, empty when valid."""
        # A plain tuple on the hot path; `verdicts` builds the records when asked.
        self._verdicts.append((step, tool, decision, failures, call_id))
        if not failures:
            return
        cause = failures[0].cause
        with self._lock:
            if self._first_error is None or step < self._first_error[0]:
                self._first_error = (step, cause or "")

    @property
    def verdicts(self) -> list[Verdict]:
        """Each call's verdict, in the order the calls finished (sort by step for parallel
        calls)."""
        return [
            Verdict.of(tool, step, call_id, decision, failures)
            for step, tool, decision, failures, call_id in self._verdicts
        ]

    @property
    def length(self) -> int:
        """T: every call emitted so far, blocked ones included."""
        return self._length

    @property
    def first_error_depth(self) -> int:
        """FED: the first invalid step, or T + 1 when every call so far was valid."""
        return self._first_error[0] if self._first_error else self._length + 1

    @property
    def first_error_cause(self) -> str | None:
        return self._first_error[1] if self._first_error else None

    # -- bound variables ---------------------------------------------------------------------
    def bind(self, kind: str, value: Any, *, source: str = "user", shown: bool = True) -> None:
        """Make ``value`` a usable value of ``kind`` (an id the user typed, say).

        ``shown=False``: the application makes the value valid without the model having seen
        it; it is then neither offered in a rejection's message nor counted as seen.
        """
        self._bindings.produce(kind, value, source, None, shown)
        if shown:
            self.observe(value)

    def bind_result(self, tool: Any, result: Any) -> None:
        """Bind what ``tool`` (a :class:`Tool`, e.g. ``guard.get_tool(name)``) would produce
        from ``result``, without a step: context the agent had before the trajectory began.

        Never raises: the adapters call it with every earlier result of a conversation, before
        the run's first call, and a ``produces`` callable that fails on one (an error result
        of another shape) must not stop the agent; what it found before failing is bound, as
        for a call's own result, and the failure is logged.

        A result its tool's ``error_result`` (or, where the tool leaves it to the guard, the
        default rule: a mapping with a non-empty ``"error"``) calls an error binds nothing,
        as when the call ran. A value this trajectory already binds as that kind keeps its
        binding: a conversation
        kept in one trajectory replays its earlier turns' results at each new turn, and an id
        a call invalidated there stays stale (the trajectory knows more than the history)."""
        source = f"{tool.name} (context)"
        bindings = self._bindings
        try:
            if _is_error(tool, result):  # it bound nothing when the call ran: nor now
                return
            for kind, value in tool.extract(result):
                if bindings.lookup(kind, value) is None:
                    self.bind(kind, value, source=source)
            self.observe(result)
        except Exception:
            logger.exception(
                "toolguard: reading an earlier result of %s failed; what it produces is not bound",
                shorten_text(str(getattr(tool, "name", "?")), NAME_LIMIT),
            )

    def lookup(self, kind: str, value: Any) -> Binding | None:
        """The binding of ``value`` as a ``kind`` (live or stale), or None. A value of
        another type written the same (``"42"`` for ``42``, a ``UUID`` for its string) is
        the same value: the model copied it as text and the parameter's type converted it."""
        return self._bindings.find(kind, value)

    def unsettled(self, fail_open: bool) -> Failure | bool | None:
        """Whether what this call looked up may be incomplete: False here (everything this
        trajectory knows is in this process); a shared trajectory's call that gave up
        waiting for other processes' calls in flight answers with the store's failure (fail
        closed) or None (fail open), which a failed lookup then reports instead of blaming
        the agent."""
        return False

    def kinds_of(self, value: Any) -> list[str]:
        """The kinds ``value`` is bound as."""
        return self._bindings.kinds_of(value)

    def live_values(self, kind: str, *, shown_only: bool = False) -> list[Any]:
        """Values of ``kind`` usable now; ``shown_only``: only those the model has seen."""
        return self._bindings.live_values(kind, shown_only=shown_only)

    # -- what the agent has seen (the information check) -------------------------------------
    def observe(self, value: Any) -> None:
        """Record something the agent has seen: user input, a document, a tool output."""
        if isinstance(value, str):
            self._seen.add(value)
            self._seen_texts.add(value)
        else:
            add_leaves(value, self._seen.add)

    def has_seen(self, value: Any) -> bool:
        text = value if isinstance(value, str) else str(value)
        if text in self._seen:
            return True
        # Free text (a user message) may contain the value inside a sentence: an indexed
        # `any(text in t for t in texts)` (seen.py), not a scan of the whole history.
        return self._seen_texts.contains(text)

    # -- life cycle --------------------------------------------------------------------------
    def start(self) -> Trajectory:
        """Begin the episode: opens the summary span. ``with`` does this (and ``end``) for you;
        frameworks whose hooks open and close an episode in different places call both."""
        if self._started:
            raise UsageError(f"trajectory {self.id!r} was already started")
        self._started = True
        count_open(+1)
        at_exit.opened(self)  # ended at interpreter exit if nothing ends it before
        if self.writes_summary:
            self._span = tel.start_span(self._tracer, contract.SUMMARY_SPAN_NAME)
        if self._join is not None:
            registry, key = self._join
            registry.add(key, self)
        return self

    def end(self, exc: BaseException | None = None) -> None:
        """End the episode: writes the summary span (T, FED, Y, labels). Idempotent."""
        if self.ended:
            return
        self.ended = True
        if self._started or self._at_exit:  # no longer the exit hook's to end
            at_exit.forget(self)
        if self._started:
            count_open(-1)
        if self._registry is not None:
            self._registry._forget(self)
        self._write_summary(exc)

    def _write_summary(self, exc: BaseException | None) -> None:
        """The summary span opened at start, with T, FED, Y and the labels (a trajectory
        kept in a shared store claims it instead: shared.py)."""
        if self._span is not None:
            self._end_summary(self._span, exc)

    def _end_summary(self, span: Span, exc: BaseException | None) -> None:
        """Write T, FED, Y and the labels on the summary span, and end it."""
        if tel.is_recording(span):
            tel.set_attributes(span, self.summary_attributes())
            if exc is not None:
                # The type only: an exception's text may hold argument values (privacy).
                tel.set_error(span, f"trajectory ended by {type(exc).__name__}")
        tel.end_span(span)

    @contextmanager
    def activate(self) -> Iterator[Trajectory]:
        """Make this trajectory current in this context (another thread, a framework's hook
        that runs where ``with trajectory(...)`` is not visible), then restore the previous."""
        token = current_var.set(self)
        span_token = tel.attach(self._span) if self._span is not None else None
        try:
            yield self
        finally:
            tel.detach(span_token)
            current_var.reset(token)

    def __enter__(self) -> Trajectory:
        if not self._started:
            self.start()
        if self._span is not None:
            self._span_token, self._span_context = tel.attach_context(self._span)
        self._var_token = current_var.set(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._var_token is not None:
            current_var.reset(self._var_token)
            self._var_token = None
        tel.detach(self._span_token)
        self._span_token = None
        self.end(exc)

    async def __aenter__(self) -> Trajectory:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        state = "ended" if self.ended else ("open" if self._started else "not started")
        return (
            f"Trajectory({self.id!r}, T={self.length}, FED={self.first_error_depth}, "
            f"success={self.success!r}, {state})"
        )

    def summary_attributes(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            contract.TRAJECTORY_ID: self.id,
            contract.TRAJECTORY_LENGTH: self.length,
            contract.TRAJECTORY_FED: self.first_error_depth,
        }
        if self.first_error_cause is not None:
            out[contract.TRAJECTORY_FIRST_ERROR_CAUSE] = self.first_error_cause
        if self.success is not None:
            out[contract.TRAJECTORY_SUCCESS] = bool(self.success)
        if self.conversation_id is not None:
            out[contract.GEN_AI_CONVERSATION_ID] = self.conversation_id
        for key, value in self.labels.items():
            out[contract.LABEL_PREFIX + key] = value
        return out


def trajectory(
    id: str | None = None,
    *,
    labels: Mapping[str, Any] | None = None,
    user_input: str | Iterable[str] | None = None,
    conversation_id: str | None = None,
    tracer_provider: Any = None,
    guard: Any = None,
) -> Trajectory:
    """Open a trajectory: ``with toolguard.trajectory("task-7", labels={"model": m}) as t:``.

    Its summary span goes where its calls' spans go: pass the ``guard`` whose tools it calls
    (the same as ``guard.trajectory(...)``: the guard's tracer provider), or the
    ``tracer_provider`` the guard was made with; neither, the global provider. A guard whose
    provider is not the trajectory's says so once (the report would see calls without their
    trajectory's outcome)."""
    if guard is not None:
        if tracer_provider is not None:
            raise UsageError(
                "trajectory(): pass guard= or tracer_provider=, not both (the guard's provider "
                "is the one its calls use)"
            )
        made: Trajectory = guard.trajectory(
            id, labels=labels, user_input=user_input, conversation_id=conversation_id
        )
        return made
    tracer = tel.get_tracer(tracer_provider) if tracer_provider is not None else None
    return Trajectory(
        id,
        labels=labels,
        user_input=user_input,
        conversation_id=conversation_id,
        tracer=tracer,
        tracer_provider=tracer_provider,
    )


def _is_error(tool: Any, result: Any) -> bool:
    """Whether ``tool``'s own ``error_result`` (the call view: None is the guard's, read here
    as the default rule; False, none) says ``result`` is the environment's rejection."""
    detect = getattr(getattr(tool, "spec", None), "error_result", None)
    if detect is None:
        detect = default_error_result
    return bool(detect(result)) if detect else False
