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

from typing import TYPE_CHECKING

import toolguard as tg

from ._meta import CALL_ID, STEP, TRAJECTORY_ID

if TYPE_CHECKING:
    from .calls import CallGuard
    from .client import GuardedClient
    from .contracts import as_contract
    from .results import error_result, result_value
    from .server import GuardMiddleware, UpstreamTimeout, guard_server

# The one place the supported range is written: pyproject.toml's dependencies mirror it
# (tests/test_adapter_declaration.py). Checked where the SDK is imported (_sdk.py).
ADAPTER = tg.Adapter(
    "toolguard-mcp",
    requires={"mcp": "mcp>=2.3,<3"},
    install="pip install -e . -e adapters/mcp",
)
__version__ = ADAPTER.version

# Loaded on first use: importing the SDK takes seconds, and the stdio proxy never needs it
# (so the exports do not require it: the modules that import the SDK do).
__getattr__, __dir__ = ADAPTER.exports(
    {
        "CallGuard": ".calls",
        "as_contract": ".contracts",
        "GuardedClient": ".client",
        "error_result": ".results",
        "result_value": ".results",
        "GuardMiddleware": ".server",
        "UpstreamTimeout": ".server",
        "guard_server": ".server",
    },
    require=False,
)

__all__ = [
    "ADAPTER",
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
