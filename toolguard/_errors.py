"""One exception hierarchy under one base class.

Errors for the developer (a broken tool definition, a misused API, bad report input) are kept
apart from what the model reads: a rejected call carries a :class:`Rejection`, whose
``message`` is for logs and ``model_message`` for the agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runtime.verdict import Rejection


class ToolGuardError(Exception):
    """Base of every toolguard exception."""


class ToolDefinitionError(ToolGuardError, TypeError):
    """A tool definition is broken (bad schema, unknown argument in a declaration).

    Raised when the tool is declared, never when it is called, and names the tool.
    """


class UsageError(ToolGuardError, TypeError):
    """The guard's API was called wrongly: a tool name that is not a string, a pending call
    finished twice, a tool declared by contract alone called as a function."""


class ToolCallRejected(ToolGuardError):
    """A guarded function called directly was rejected; ``rejection`` says why.

    The dispatch entry points (``guard.call``, ``acall``, ``acall_batch``, ``check``) return
    the :class:`Rejection` instead of raising. ``cause``, ``check``, ``message``,
    ``model_message``, ``failed_checks``, ``tool``, ``step`` and ``call_id`` read through to it.
    """

    def __init__(self, rejection: Rejection) -> None:
        self.rejection = rejection
        super().__init__(rejection.developer_text())

    def __getattr__(self, name: str) -> object:
        if name == "rejection":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.rejection, name)

    def __reduce__(self) -> tuple[type[ToolCallRejected], tuple[Rejection]]:
        return type(self), (self.rejection,)


class MalformedCall(ToolCallRejected, TypeError):
    """A direct call Python itself would refuse for its shape (too many positional
    arguments, a keyword for a positional-only parameter, one argument given twice): a
    rejection, and the TypeError code calling the function unguarded would catch."""


class ForkError(ToolGuardError, RuntimeError):
    """A fork strategy could not isolate or clean up a dry run (a savepoint that is gone
    because the dry run ended the transaction). Inside the guard it is a guard error, handled
    by ``on_guard_error``; it reaches the caller only from a strategy used directly."""
