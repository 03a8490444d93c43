"""The default ``error_result``: how a tool's answer says the environment rejected the call.
Here, below the checks and the trajectories, because both read it (the judge stage after a
call, ``Trajectory.bind_result`` for a result from before the trajectory)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Error values whose emptiness says there was none ({"error": []}), told by their length.
SIZED = (str, bytes, bytearray, Mapping, list, tuple, set, frozenset)


def default_error_result(result: Any) -> bool:
    """A mapping with a non-empty ``"error"`` value is the environment's rejection.

    ``{"error": None}`` / ``{"error": ""}`` / ``{"error": False}`` / ``{"error": []}`` say
    there was none. Any other value is an error; it is never compared (an array's ``==``
    is no truth value, an object's may raise).
    """
    if not isinstance(result, Mapping) or "error" not in result:
        return False
    value = result["error"]
    if value is None or value is False:
        return False
    return len(value) > 0 if isinstance(value, SIZED) else True
