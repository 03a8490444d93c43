"""The default ``error_result``: how a tool's answer says the environment rejected the call.
Here, below the checks and the trajectories, because both read it (the judge stage after a
call, ``Trajectory.bind_result`` for a result from before the trajectory)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def default_error_result(result: Any) -> bool:
    """A mapping with a non-empty ``"error"`` value is the environment's rejection.

    ``{"error": None}`` / ``{"error": ""}`` / ``{"error": False}`` say there was none.
    """
    if not isinstance(result, Mapping) or "error" not in result:
        return False
    value = result["error"]
    return value is not None and value is not False and value != "" and value != {}
