"""The schema stage's failures of their own: arguments that do not fit the function's
signature, and a tool the guard does not know. (The stage itself is ``Pipeline.admit``
calling the validator the tool's schema built once: ``tools/schema.py``.)"""

from __future__ import annotations

from ..tools.suggest import ToolNames
from ..tools.tool import Tool
from ..verdict import NAME_LIMIT, Failure, shorten_text


def bind_failure(tool: Tool, exc: TypeError) -> Failure:
    """Positional and keyword arguments that do not fit the function's signature."""
    name, text = shorten_text(tool.name, NAME_LIMIT), shorten_text(str(exc), 300)
    return Failure(
        "schema",
        "schema.args",
        f"{name}: {text}",
        f"The call to `{name}` is malformed: {text}. Call it with arguments matching "
        f"{tool.schema.hint}.",
    )


def unknown_tool_failure(name: str, suggest: ToolNames) -> Failure:
    """A call to a tool the guard does not know, with the closest few names it does."""
    # Only the closest few names, never the whole tool set (it may hold tools this agent
    # was not offered); a giant name is not compared at all.
    close = suggest.close(name) if len(name) <= 128 else []
    hint = f" Did you mean {', '.join(f'`{c}`' for c in close)}?" if close else ""
    shown = shorten_text(name, NAME_LIMIT)
    return Failure(
        "schema",
        "schema.tool",
        f"no tool named {shown!r} in the guarded tool set",
        f"There is no tool named `{shown}`.{hint} Call one of the tools you were given.",
    )
