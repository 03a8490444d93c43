"""The MCP SDK, or an ImportError that names the install command (and a warning when the
installed SDK is outside the supported range). Imported first by every module that needs it."""

from __future__ import annotations

from . import ADAPTER

ADAPTER.require()
