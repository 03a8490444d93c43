"""The public face of a guarded call: :class:`PendingCall` (``guard.check(...)``).

Public (what an adapter running the tool itself needs): ``name``, ``call_id``, ``step``,
``arguments``, ``rejection``, ``done``, ``verdict``, ``call_parts()``, ``finish`` / ``fail``
/ ``cancel`` / ``reject`` and the ``with`` / ``async with`` block. The state and the closing are
``call.py``'s; everything with a leading underscore is the pipeline's.
"""

from __future__ import annotations

import logging
from types import TracebackType

from ..trajectories.nesting import shown
from ..verdict import Failure, Rejection
from .call import _Call

logger = logging.getLogger("toolguard")


class PendingCall(_Call):
    """A checked call. ``rejection`` is set when it must not run (it is already closed);
    otherwise run it (``call_parts()`` gives the validated arguments back as ``args, kwargs``)
    and close it with exactly one of :meth:`finish`, :meth:`fail` or :meth:`cancel`.

    As a context manager (``with`` or ``async with``) the call's span is current while the
    tool runs, an exception leaving the block is :meth:`fail`, and a block left without
    closing the call cancels it (with a warning). A pending call dropped unclosed is
    cancelled the same way when it is garbage-collected.
    """

    __slots__ = ("__weakref__",)

    def reject(self, failure: Failure) -> Rejection:
        """The framework refused the admitted call before it ran (its own argument
        validation, say): closed as blocked with ``failure``. Returns the rejection to hand
        to the model."""
        if self._decision is not None or self.rejection is not None:
            self._closed_already("reject")
        self._leave()
        # A check log mode already failed (the guard's own schema.args, say) is listed once:
        # failed_checks names each check that failed, and the guard's message says it first.
        known = any(f.check == failure.check for f in self._failures)
        self._reject(None if known else failure)
        assert self.rejection is not None
        return self.rejection

    def __enter__(self) -> PendingCall:
        if self.rejection is None:
            self._enter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leave()
        if self._decision is not None:
            return
        if exc is not None:
            self.fail(exc)
        else:
            logger.warning(
                "toolguard: %s (step %s) left its block without finish() or fail(); "
                "recorded as cancelled",
                shown(self.name),
                self.step,
            )
            self.cancel()

    async def __aenter__(self) -> PendingCall:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __del__(self) -> None:
        try:
            if self._decision is None and hasattr(self, "_failures"):
                logger.warning(
                    "toolguard: %s (step %s) was dropped without finish(), fail() or "
                    "cancel(); recorded as cancelled",
                    shown(self.name),
                    self.step,
                )
                self.cancel()
        except Exception:  # never raise from a finalizer
            pass
