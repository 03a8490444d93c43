"""The commands of ``toolguard`` that have parsers of their own, and how they are started.

Apart from the report's CLI (``_cli``) so the command's entry point (``__main__``) can start
them without importing the report and its numpy: ``mcp-proxy`` needs neither.
"""

from __future__ import annotations

import importlib
import sys

from ._extras import install_hint, is_missing

EXIT_ERROR = 2

# Loaded only when asked for: `replay` drives the runtime guard, `mcp-proxy` lives in the MCP
# adapter (a distribution of its own).
DELEGATED = {
    "replay": ("toolguard.replay.cli", "replay recorded agent runs through the guard into spans"),
    "mcp-proxy": ("toolguard_mcp.proxy", "guard any MCP server: serve its tools, check each call"),
}

# Imported before a replay starts: it writes its spans with the SDK's file exporter, and a run
# that ends in a traceback after reading its input would be the worse way to learn that.
_REPLAY_NEEDS = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.json.file")


def missing_report_extra(command: str, exc: ImportError) -> int:
    """Say in one line that ``toolguard command`` needs the [report] extra; the exit status."""
    name = f"toolguard {command}" if command else "toolguard"
    print(
        f"toolguard: error: `{name}` needs toolguard-otel's report extra "
        f"({exc.name} is not installed): {install_hint('report')}",
        file=sys.stderr,
    )
    return EXIT_ERROR


def delegate(command: str, argv: list[str]) -> int:
    """Run ``toolguard command argv`` with the command's own parser; the exit status."""
    module_name, _ = DELEGATED[command]
    try:
        module = importlib.import_module(module_name)
        if command == "replay":
            for needed in _REPLAY_NEEDS:
                importlib.import_module(needed)
    except ImportError as exc:
        if command == "mcp-proxy":
            print(
                # The adapter is on no package index: the command that works from a checkout.
                "toolguard: error: `toolguard mcp-proxy` needs the MCP adapter; from a "
                "toolguard checkout: pip install -e . -e adapters/mcp",
                file=sys.stderr,
            )
            return EXIT_ERROR
        if is_missing(exc, "report"):
            return missing_report_extra(command, exc)
        raise
    if command == "mcp-proxy":
        return int(module.main(argv, prog="toolguard mcp-proxy"))
    return int(module.main(argv))
