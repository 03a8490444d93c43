"""toolguard for the Model Context Protocol.

- :func:`guard_server` / :class:`GuardMiddleware`: middleware for an ``mcp`` server that
  checks every ``tools/call`` (a blocked call answers ``isError`` with the guard's message);
- :class:`GuardedClient`: a host's ``Client`` / ``ClientSession`` whose ``call_tool`` is
  checked before the request leaves;
- ``toolguard mcp-proxy`` (:func:`toolguard_mcp.proxy.main`): any MCP server behind a
  contract file, without touching its code.

Requests may carry ``toolguard/trajectory_id``, ``toolguard/step`` and ``toolguard/call_id``
in ``_meta`` (docs/protocol.md, section 6.4): a guard in another process then continues the
host's trajectory.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._meta import CALL_ID, STEP, TRAJECTORY_ID

if TYPE_CHECKING:
    from .calls import CallGuard, as_contract
    from .client import GuardedClient
    from .results import error_result, result_value
    from .server import GuardMiddleware, UpstreamTimeout, guard_server

__version__ = "0.1.0"

# Loaded on first use: importing the SDK takes seconds, and the stdio proxy never needs it.
_LAZY = {
    "CallGuard": ".calls",
    "as_contract": ".calls",
    "GuardedClient": ".client",
    "error_result": ".results",
    "result_value": ".results",
    "GuardMiddleware": ".server",
    "UpstreamTimeout": ".server",
    "guard_server": ".server",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolguard_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CALL_ID",
    "STEP",
    "TRAJECTORY_ID",
    "CallGuard",
    "GuardMiddleware",
    "GuardedClient",
    "UpstreamTimeout",
    "__version__",
    "as_contract",
    "error_result",
    "guard_server",
    "result_value",
]
