"""The relay of a replica (:mod:`toolguard_mcp.replica`): one server shared by every session,
and the proxy's own handshake with it, which every host's ``initialize`` is answered from.
"""

from __future__ import annotations

from typing import Any

from .relay import StdioRelay


class SharedRelay(StdioRelay):
    """The replica's relay: one server for every session; the feed sets ``session`` and
    ``client`` before each host message (the relay handles them one at a time)."""

    initialized: dict[str, Any] | None = None

    async def _probe(self) -> None:
        """The proxy's handshake, which every host's ``initialize`` is answered from: unlike
        the other modes', a server that does not answer it cannot be served."""
        from mcp_types.version import LATEST_HANDSHAKE_VERSION

        self.probing = True
        try:
            result = await self._handshake(LATEST_HANDSHAKE_VERSION)
        finally:
            self.probing = False
        self.initialized = result
