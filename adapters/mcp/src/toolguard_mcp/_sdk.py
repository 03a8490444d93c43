"""The MCP SDK, or an ImportError that says which extra installs it."""

from __future__ import annotations

try:
    import mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "toolguard_mcp needs the MCP SDK (mcp>=2.3): pip install 'toolguard-otel[mcp]'"
    ) from exc
