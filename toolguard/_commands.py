"""The commands of ``toolguard`` that have parsers of their own, and how they are started.

Apart from the report's CLI (``_cli``) so the command's entry point (``__main__``) can start
them without importing the report and its numpy: ``mcp-proxy`` needs neither.
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import entry_points

from ._extras import install_hint, is_missing

EXIT_ERROR = 2

# Where another distribution plugs a command into `toolguard`: an entry point named after the
# command, ``main(argv, prog=...)`` returning the exit status. The core then imports no
# adapter by name: `toolguard mcp-proxy` runs whatever distribution declares it.
COMMANDS_GROUP = "toolguard.commands"

# Listed by `toolguard --help` whether or not a distribution provides them, so the help of a
# core-only install still says where the proxy is; loaded only when asked for.
DELEGATED = {
    "replay": "replay recorded agent runs through the guard into spans",
    "infer": "propose a contract (refs, produces, grounded) from recorded runs",
    "mcp-proxy": "guard any MCP server: serve its tools, check each call",
}
# Built in, not plugged in: `replay` drives the runtime guard and ships with the core.
_BUILT_IN = {"replay": "toolguard.replay.cli", "infer": "toolguard.infer.cli"}
# What provides each plugged-in command, and the install command that works from a checkout
# (the adapters are on no package index).
_PROVIDED_BY = {"mcp-proxy": ("the MCP adapter", "pip install -e . -e adapters/mcp")}

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
    if command not in _BUILT_IN:
        return _plugged_in(command, argv)
    try:
        module = importlib.import_module(_BUILT_IN[command])
        for needed in _REPLAY_NEEDS:
            importlib.import_module(needed)
    except ImportError as exc:
        if is_missing(exc, "report"):
            return missing_report_extra(command, exc)
        raise
    return int(module.main(argv))


def _plugged_in(command: str, argv: list[str]) -> int:
    found = entry_points(group=COMMANDS_GROUP, name=command)
    try:
        # The first on sys.path, as importlib.metadata resolves a distribution found twice.
        main = next(iter(found)).load() if found else None
    except ImportError:
        main = None  # metadata left behind by an uninstalled adapter, or its imports missing
    if main is None:
        adapter, install = _PROVIDED_BY[command]
        print(
            f"toolguard: error: `toolguard {command}` needs {adapter}; from a "
            f"toolguard checkout: {install}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return int(main(argv, prog=f"toolguard {command}"))
