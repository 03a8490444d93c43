"""A check that raised: fail closed (a failure of that check) or fail open (a loud pass)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..tools.conditions import shorten
from ..verdict import Failure

if TYPE_CHECKING:
    from ..calls.call import _Call

logger = logging.getLogger("toolguard")


def guard_error(
    check: str, cause: str, what: str, exc: Exception, fail_open: bool, record_content: bool
) -> Failure | None:
    """A check that raised: a failure of that check (fail closed), or a loud pass.

    The log names the check and the exception's type; its text and traceback (which may
    hold argument values) only with ``record_content``.
    """
    detail = f"{type(exc).__name__}: {shorten(str(exc))}"
    logged = detail if record_content else type(exc).__name__
    trace = exc if record_content else None
    if fail_open:
        logger.warning(
            "toolguard: %s raised %s; failing open (the check counts as passed)",
            what,
            logged,
            exc_info=trace,
        )
        return None
    logger.error("toolguard: %s raised %s; failing closed", what, logged, exc_info=trace)
    return Failure(
        cause,
        check,
        f"guard error: {what} raised {detail} (fail closed)",
        f"This call could not be verified ({what} could not be evaluated), so it was not "
        "accepted. Try a different call.",
        guard_error=True,
        telemetry_message=f"guard error: {what} raised {type(exc).__name__} (fail closed)",
    )


def settled(call: _Call, found: list[Failure]) -> list[Failure] | None:
    """What a lookup stage found, unless the call gave up waiting for other processes' calls
    in flight (a shared trajectory store): then what it did not find may still be on its
    way, and the store's guard error (fail closed) or a pass (fail open) stands instead of
    a failure the agent would be blamed for."""
    traj = call._traj
    if found and traj is not None and traj._shared:
        doubt = traj.unsettled(call._guard.fail_open)
        if doubt is not False:
            return [doubt] if isinstance(doubt, Failure) else None
    return found
