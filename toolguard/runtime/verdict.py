"""What a check finds and what a call comes to: Failure, Verdict and Rejection.

One family: every finished call has a :class:`Verdict` (its span says the same); a call that
failed and was handed back to the agent is a :class:`Rejection`, a verdict that also carries
the model-facing text; the exception a directly called tool raises carries the rejection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import _contract as contract

_RANK = {cause: i for i, cause in enumerate(contract.CAUSES)}


MESSAGE_LIMIT = 1024  # characters of a developer or telemetry message
MODEL_MESSAGE_LIMIT = 2000  # characters of the text handed back to the model
NAME_LIMIT = 128  # characters of a tool name, step id or trajectory id echoed in a message


def shorten_text(text: str, limit: int = 200) -> str:
    """``text`` as a message echoes it: at most ``limit`` characters, then an ellipsis.

    The one cut for every name, id, place or environment text a message repeats (a model
    may send a 10 MB tool name, a tool may raise with a 10 MB text): each echoed value is
    cut on its own, so what the message says around it survives. Values shown as Python
    literals go through ``conditions.shorten`` (a bounded repr) instead.
    """
    return text if len(text) <= limit else text[:limit] + "…"


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed check: its cause and stable id, and three texts.

    ``message`` is for the developer in process (it shows the values that broke the check,
    shortened); ``model_message`` is for the model (what was wrong and how to fix the call);
    ``telemetry_message`` says the same as ``message`` without any argument or result value,
    for spans and logs (the values go there only with ``record_content=True``).
    """

    cause: str
    check: str
    message: str
    model_message: str
    guard_error: bool = False
    telemetry_message: str = ""

    @property
    def ok(self) -> bool:
        """Always False: a failure is one check that did not pass (read as the verdicts'
        ``ok``; a Failure itself stays truthy, an object that is there)."""
        return False

    def __post_init__(self) -> None:
        # Bounded whatever the input (a 10 MB argument, a giant exception text).
        if len(self.message) > MESSAGE_LIMIT:
            object.__setattr__(self, "message", self.message[:MESSAGE_LIMIT] + "…")
        if len(self.model_message) > MODEL_MESSAGE_LIMIT:
            object.__setattr__(
                self, "model_message", self.model_message[:MODEL_MESSAGE_LIMIT] + "…"
            )
        if not self.telemetry_message:
            object.__setattr__(self, "telemetry_message", f"check {self.check} failed")
        elif len(self.telemetry_message) > MESSAGE_LIMIT:
            object.__setattr__(
                self, "telemetry_message", self.telemetry_message[:MESSAGE_LIMIT] + "…"
            )


def in_precedence_order(failures: Sequence[Failure]) -> list[Failure]:
    return sorted(failures, key=lambda f: _RANK[f.cause])


@dataclass(frozen=True)
class Verdict:
    """One call's verdict, as its span records it.

    ``decision``: ``allowed`` (ran), ``blocked`` (did not run), ``logged`` (invalid, ran
    because the guard only logs) or ``cancelled`` (the caller gave up on it).
    ``failed_checks`` lists every failed check id in precedence order; ``cause``, ``check``
    and ``message`` describe the first.

    The convention of every verdict (this one, :class:`Rejection`, ``tg.PlanVerdict``,
    ``tg.PlanStepVerdict``): ``ok`` says nothing failed; ``message`` is for the developer
    (it may show the values that broke a check, shortened), ``model_message`` for the model
    (what was wrong and how to fix the call); both None when ``ok``. No verdict's truth
    value says whether it passed: ``if pending.rejection:`` must keep meaning "there is
    one", so a verdict is an object that is there (``tg.PlanVerdict``, which used to be
    falsy when failing, refuses ``bool()`` and names ``ok``).
    """

    tool: str
    step: int | None
    call_id: str | None
    valid: bool
    decision: str
    cause: str | None = None
    check: str | None = None
    message: str | None = None
    failed_checks: tuple[str, ...] = ()
    model_message: str | None = None

    @property
    def ok(self) -> bool:
        """Nothing failed (the same as ``valid``)."""
        return self.valid

    @property
    def executed(self) -> bool:
        """Whether the tool ran (an environment rejection ran and failed)."""
        return self.decision in (contract.ALLOWED, contract.LOGGED)

    @classmethod
    def of(
        cls,
        tool: str,
        step: int | None,
        call_id: str | None,
        decision: str,
        failures: list[Failure],
    ) -> Verdict:
        if not failures:
            return cls(tool, step, call_id, True, decision)
        first = failures[0]
        return cls(
            tool,
            step,
            call_id,
            False,
            decision,
            first.cause,
            first.check,
            first.message,
            tuple(f.check for f in failures),
            first.model_message,
        )


@dataclass(frozen=True)
class Rejection(Verdict):
    """A failed call handed back to the agent: ``str()`` is the text for the model.

    ``decision`` says whether the call ran: ``blocked`` (it did not) or ``allowed`` (it ran
    and the environment rejected it). Never ``ok``.
    """

    model_message: str = ""

    def __str__(self) -> str:
        tool = shorten_text(self.tool, NAME_LIMIT)
        return f"Error: the call to `{tool}` was rejected ({self.cause}). {self.model_message}"

    def developer_text(self) -> str:
        """The text of the :class:`ToolCallRejected` a directly called tool raises."""
        tool = shorten_text(self.tool, NAME_LIMIT)
        return f"{tool}: {self.cause} check {self.check!r} failed: {self.message}"

    @classmethod
    def from_failures(
        cls,
        tool: str,
        step: int | None,
        call_id: str | None,
        decision: str,
        failures: list[Failure],
    ) -> Rejection:
        first = failures[0]
        return cls(
            tool,
            step,
            call_id,
            False,
            decision,
            first.cause,
            first.check,
            first.message,
            tuple(f.check for f in failures),
            first.model_message,
        )
