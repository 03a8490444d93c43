"""What a plan's checks say: a step's failures, with the names and places they quote cut to
size, and the span attributes of a failed step (check.py and run.py share them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import _contract as contract
from ..verdict import NAME_LIMIT, Failure, shorten_text
from .plan import PLAN_CHECK, StepRef

if TYPE_CHECKING:
    from ..guard import Guard


def malformed(message: str) -> Failure:
    return Failure(
        contract.SCHEMA,
        PLAN_CHECK,
        message,
        message,
        telemetry_message="the plan or one of its steps is malformed",
    )


def dependency_failure(arg: str, text: str, telemetry: str) -> Failure:
    return Failure(
        contract.DEPENDENCY, f"dependency.{arg}", text, text, telemetry_message=telemetry
    )


def place_text(place: tuple[Any, ...]) -> str:
    # A place 6,000 levels deep, or a 10 MB key, is echoed cut like any other value.
    return shorten_text(".".join(str(p) for p in place), NAME_LIMIT) or "arguments"


def producers(guard: Guard, kind: str) -> list[str]:
    """The names of (at most five) tools that produce ``kind``, for a planner's message."""
    names = sorted(
        name for name, (tool, _) in guard._tools.items() if any(k == kind for k, _ in tool.produces)
    )
    return [f"`{n}`" for n in names[:5]]


def ref_text(ref: StepRef) -> str:
    return shorten_text(str(ref), NAME_LIMIT)  # a step id may be of any length


def short_name(name: str) -> str:
    return shorten_text(name, 100)


def hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return None
    return value


def short_id(step_id: str) -> str:
    return repr(shorten_text(step_id, NAME_LIMIT))


def plan_failure(failure: Failure, prefix: str) -> Failure:
    """The failure with its message for the planner: which step, what, how to fix it."""
    return Failure(
        failure.cause,
        failure.check,
        f"{prefix} {failure.message}",
        f"{prefix} {failure.model_message}",
        failure.guard_error,
        failure.telemetry_message,
    )


def failure_attributes(failure: Failure) -> dict[str, Any]:
    return {
        contract.PLAN_CAUSE: failure.cause,
        contract.PLAN_CHECK: failure.check,
        contract.PLAN_MESSAGE: failure.telemetry_message[:1024],
    }
