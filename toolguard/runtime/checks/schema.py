"""The schema stage: the arguments bound or parsed into one dict, then validated by the
tool's schema (built once when the tool is declared: ``schema.py``)."""

from __future__ import annotations

from typing import Any

from ..schema import SchemaFailure
from ..tool import Tool
from ..verdict import NAME_LIMIT, Failure, shorten_text


def check_schema(tool: Tool, raw: dict[str, Any]) -> tuple[dict[str, Any], Failure | None]:
    """The validated arguments, or the raw ones and the schema failure."""
    try:
        return tool.schema.validate(raw), None
    except SchemaFailure as exc:
        return raw, exc.failure


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
