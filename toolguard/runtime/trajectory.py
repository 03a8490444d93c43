"""Trajectories: step numbering, bound variables, what the agent has seen, the summary span.

The current trajectory lives in a ContextVar, so trajectories in concurrent threads and
asyncio tasks never see each other's steps or bindings.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple

from opentelemetry.trace import Tracer

from .. import _contract as attr
from . import telemetry as tel

_current: ContextVar[Trajectory | None] = ContextVar("toolguard_trajectory", default=None)


def current_trajectory() -> Trajectory | None:
    """The trajectory open in this context, or None."""
    return _current.get()


class Verdict(NamedTuple):
    """One call's verdict, as its span records it."""

    step: int
    tool: str
    valid: bool
    decision: str
    failed_checks: tuple[str, ...]
    cause: str | None


@dataclass(slots=True)
class _Binding:
    live: bool
    produced_by: str
    step: int | None
    invalidated_by: str | None = None


def _key(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return None
    return value


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
    ) -> None:
        self.id = id if id is not None else uuid.uuid4().hex
        self.labels = {str(k): str(v) for k, v in (labels or {}).items()}
        self.conversation_id = conversation_id
        self.success: bool | None = None
        self._tracer = tracer or tel.get_tracer()
        self._steps = itertools.count(1)  # next() on a count is atomic under the GIL
        self._length = 0
        self._lock = threading.Lock()
        self._first_error: tuple[int, str] | None = None
        # In emission order only when calls finish in it; sort by step for parallel calls.
        self._verdicts: list[tuple[int, str, str, list[Any]]] = []
        self._bindings: dict[str, dict[Any, _Binding]] = {}
        self._seen: set[str] = set()
        self._texts: list[str] = []
        self._span: Any = None
        self._span_token: object | None = None
        self._var_token: Token[Trajectory | None] | None = None
        if user_input is not None:
            for text in [user_input] if isinstance(user_input, str) else user_input:
                self.observe(text)

    # -- steps and verdicts ------------------------------------------------------------------
    def next_step(self) -> int:
        """Reserve the next step number (emission order)."""
        step = next(self._steps)
        with self._lock:
            self._length = max(self._length, step)
        return step

    def record(self, step: int, tool: str, decision: str, failures: list[Any]) -> None:
        """Keep one call's verdict; `failures` in precedence order, empty when valid."""
        # A plain tuple on the hot path; `verdicts` builds the named records when asked.
        self._verdicts.append((step, tool, decision, failures))
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
            Verdict(
                step,
                tool,
                not failures,
                decision,
                tuple(f.check for f in failures),
                failures[0].cause if failures else None,
            )
            for step, tool, decision, failures in self._verdicts
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
    def bind(self, kind: str, value: Any, *, source: str = "user") -> None:
        """Make ``value`` a usable value of ``kind`` (an id the user typed, say)."""
        self._produce(kind, value, source, None)
        self.observe(value)

    def bind_result(self, tool: Any, result: Any) -> None:
        """Bind what ``tool`` (a :class:`Tool`, e.g. ``guard.get_tool(name)``) would produce
        from ``result``, without a step: context the agent had before the trajectory began."""
        for kind, value in tool.extract(result):
            self.bind(kind, value, source=f"{tool.name} (context)")
        self.observe(result)

    def _produce(self, kind: str, value: Any, source: str, step: int | None) -> None:
        key = _key(value)
        if key is None:
            return
        self._bindings.setdefault(kind, {})[key] = _Binding(True, source, step)

    def _invalidate(self, kind: str, value: Any, by: str) -> None:
        binding = self._bindings.get(kind, {}).get(_key(value))
        if binding is not None:
            binding.live = False
            binding.invalidated_by = by

    def lookup(self, kind: str, value: Any) -> _Binding | None:
        key = _key(value)
        return None if key is None else self._bindings.get(kind, {}).get(key)

    def kinds_of(self, value: Any) -> list[str]:
        key = _key(value)
        return [k for k, values in self._bindings.items() if key in values]

    def live_values(self, kind: str) -> list[Any]:
        return [v for v, b in self._bindings.get(kind, {}).items() if b.live]

    # -- what the agent has seen (the information check) -------------------------------------
    def observe(self, value: Any) -> None:
        """Record something the agent has seen: user input, a document, a tool output."""
        if isinstance(value, str):
            self._seen.add(value)
            self._texts.append(value)
        else:
            for leaf in _leaves(value):
                self._seen.add(leaf)

    def has_seen(self, value: Any) -> bool:
        text = value if isinstance(value, str) else str(value)
        if text in self._seen:
            return True
        # Free text (a user message) may contain the value inside a sentence.
        return any(text in t for t in self._texts)

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self) -> Trajectory:
        self._span = tel.start_span(self._tracer, attr.SUMMARY_SPAN_NAME)
        self._span_token = tel.attach(self._span)
        self._var_token = _current.set(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._var_token is not None:
            _current.reset(self._var_token)
        tel.detach(self._span_token)
        span = self._span
        if span.is_recording():
            tel.set_attributes(span, self.summary_attributes())
            if exc is not None:
                tel.set_error(span, f"trajectory ended by {type(exc).__name__}")
                try:
                    span.record_exception(exc)
                except Exception:
                    tel.logger.exception("toolguard: could not record the exception")
        tel.end_span(span)

    async def __aenter__(self) -> Trajectory:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def summary_attributes(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            attr.TRAJECTORY_ID: self.id,
            attr.TRAJECTORY_LENGTH: self.length,
            attr.TRAJECTORY_FED: self.first_error_depth,
        }
        if self.first_error_cause is not None:
            out[attr.TRAJECTORY_FIRST_ERROR_CAUSE] = self.first_error_cause
        if self.success is not None:
            out[attr.TRAJECTORY_SUCCESS] = bool(self.success)
        if self.conversation_id is not None:
            out[attr.GEN_AI_CONVERSATION_ID] = self.conversation_id
        for key, value in self.labels.items():
            out[attr.LABEL_PREFIX + key] = value
        return out


def trajectory(
    id: str | None = None,
    *,
    labels: Mapping[str, Any] | None = None,
    user_input: str | Iterable[str] | None = None,
    conversation_id: str | None = None,
    tracer_provider: Any = None,
) -> Trajectory:
    """Open a trajectory: ``with toolguard.trajectory("task-7", labels={"model": m}) as t:``."""
    tracer = tel.get_tracer(tracer_provider) if tracer_provider is not None else None
    return Trajectory(
        id, labels=labels, user_input=user_input, conversation_id=conversation_id, tracer=tracer
    )


def _leaves(value: Any, depth: int = 0) -> Iterable[str]:
    """Scalar leaves of a tool output as text; containers and models are walked."""
    if depth > 20:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool | int | float):
        yield str(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _leaves(v, depth + 1)
    elif hasattr(value, "__pydantic_fields__"):
        for name in value.__pydantic_fields__:
            yield from _leaves(getattr(value, name, None), depth + 1)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            yield from _leaves(getattr(value, name, None), depth + 1)
