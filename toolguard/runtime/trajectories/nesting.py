"""Which trajectory a call made now counts in, and which calls are nested (no step).

A guarded tool calling another guarded tool: the agent emitted only the outer call, so the
inner one is checked and traced (below the outer span) but takes no step, whichever entry
point it goes through. While an admitted call runs, ``_inside_tool`` holds its trajectory;
a call that finds that trajectory in the context, or is handed it (``trajectory=``,
acall_batch, the tool_calls helpers), is nested.
"""

from __future__ import annotations

import logging
import threading
from contextvars import ContextVar

from ..verdict import NAME_LIMIT, shorten_text
from .current import current_var, open_trajectories
from .trajectory import Trajectory

logger = logging.getLogger("toolguard")

# The trajectory of the guarded call running in this context (True: a dry run's, whose
# trajectory is not known here); False outside any.
_inside_tool: ContextVar[Trajectory | bool] = ContextVar("toolguard_inside_tool", default=False)


_warned = threading.local()  # per thread (a thread id may be reused by a later thread)


def shown(name: str) -> str:
    """A name or id as a log line repeats it: a model may send a 10 MB tool name."""
    return shorten_text(name, NAME_LIMIT)


def counted_in(trajectory: Trajectory | None) -> Trajectory | None:
    """The trajectory a call made now takes its step in: ``trajectory``, else the current one;
    None outside any, or when the call is nested in a guarded call of it (PendingCall's rule,
    for entry points that take steps before their calls start)."""
    if trajectory is None:
        trajectory = current_var.get()
    return None if trajectory is not None and _inside_tool.get() is trajectory else trajectory


def warn_outside(tool: str) -> None:
    """A call with no trajectory while one is open elsewhere: most likely code that lost the
    context (``loop.run_in_executor``, a new thread), whose call would count nowhere and skip
    the dependency check. Said once per thread."""
    if getattr(_warned, "done", False):
        return
    _warned.done = True
    logger.warning(
        "toolguard: %s runs outside any trajectory while %d trajectory(ies) are open in other "
        "contexts (code run by loop.run_in_executor or a new thread does not see them): it is "
        "no step and skips the dependency check; pass trajectory= or use traj.activate()",
        shown(tool),
        open_trajectories(),
    )
