"""One exception hierarchy under one base class.

Errors for the developer (a broken tool definition, bad report input) are kept apart from
what the model reads: a rejected call carries both, `message` for logs and `model_message`
for the agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runtime.conditions import Failure


class ToolGuardError(Exception):
    """Base of every toolguard exception."""


class ToolDefinitionError(ToolGuardError, TypeError):
    """A tool definition is broken (bad schema, unknown argument in a declaration).

    Raised when the tool is wrapped, never when it is called, and names the tool.
    """


class ToolCallRejected(ToolGuardError):
    """A guarded call was rejected (mode ``block`` with ``rejection="raise"``).

    Attributes: ``tool``, ``step``, ``cause``, ``check``, ``message`` (for the developer),
    ``model_message`` (for the model: what was wrong and how to fix the call),
    ``failed_checks`` (check ids in precedence order).
    """

    def __init__(self, tool: str, step: int | None, failures: list[Failure]) -> None:
        first = failures[0]
        self.tool = tool
        self.step = step
        self.cause = first.cause
        self.check = first.check
        self.message = first.message
        self.model_message = first.model_message
        self.failed_checks = [f.check for f in failures]
        self.failures = failures
        super().__init__(f"{tool}: {first.cause} check {first.check!r} failed: {first.message}")


class GuardCheckError(ToolGuardError):
    """A check itself raised (a predicate with a bug). Counted as a failure of that check
    unless the guard fails open."""
