"""The request ``_meta`` keys that carry a trajectory across processes.

Defined once in the core as constants of ``toolguard._contract`` and documented in
docs/protocol.md, section 6.4 ("Trajectories across processes"); the public API does not
export them, so this is the one module of the adapter that spells them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TRAJECTORY_ID = "toolguard/trajectory_id"
STEP = "toolguard/step"
CALL_ID = "toolguard/call_id"

# Span attributes of the proxy's own (named in the core as toolguard._contract.MCP_*).
CLIENT_ATTRIBUTE = "toolguard.mcp.client"  # the host: its clientInfo name/version
UNCHECKED_ATTRIBUTE = "toolguard.mcp.unchecked"  # why the call ran without the guard's checks
TOOL_CHANGED_ATTRIBUTE = "toolguard.mcp.tool_changed"  # how the tool differs from its pin

# Keys the MCP specification reserves for the transport itself (the 2026-07-28 envelope:
# protocol version, client info and capabilities).
RESERVED_PREFIX = "io.modelcontextprotocol/"
PROTOCOL_VERSION = RESERVED_PREFIX + "protocolVersion"  # only a 2026-07-28 envelope has it


def enveloped(params: Any) -> bool:
    """Whether a request carries the 2026-07-28 envelope (its protocol version in ``_meta``)."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and PROTOCOL_VERSION in meta


def carried(meta: Any) -> tuple[str | None, int | None, str | None]:
    """(trajectory id, step, call id) a request carries; None for what is absent or ill-typed."""
    if not isinstance(meta, Mapping):
        return None, None, None
    traj_id = meta.get(TRAJECTORY_ID)
    step = meta.get(STEP)
    call_id = meta.get(CALL_ID)
    return (
        traj_id if isinstance(traj_id, str) and traj_id else None,
        step if isinstance(step, int) and not isinstance(step, bool) and step >= 1 else None,
        call_id if isinstance(call_id, str) and call_id else None,
    )


def stamped(
    meta: Mapping[str, Any] | None, trajectory_id: str, step: int | None, call_id: str | None
) -> dict[str, Any]:
    """``meta`` plus the keys that let a guard in the server's process continue the trajectory."""
    out = dict(meta or {})
    out[TRAJECTORY_ID] = trajectory_id
    if step is not None:
        out[STEP] = step
    if call_id is not None:
        out[CALL_ID] = call_id
    return out
