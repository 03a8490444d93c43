"""One ADK tool as the guard knows it: its declaration, ADK's own span of a call, and the
answers ADK gives without running the tool (an unknown name, arguments it refused)."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

import toolguard as tg
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from opentelemetry import trace
from opentelemetry.trace import Span

try:  # private in ADK: the names as ADK lists them, where it still does
    from google.adk.utils._function_call_names import CLIENT_FUNCTION_CALL_NAMES
except ImportError:  # pragma: no cover - another ADK layout
    CLIENT_FUNCTION_CALL_NAMES = frozenset()

# ADK's tracer (google.adk.telemetry.tracing): the scope of its `execute_tool` spans.
_ADK_SCOPE = "gcp.vertex.agent"
# The calls ADK itself emits for the client to answer (a confirmation, credentials, an
# input it asks for): no tool runs them.
CLIENT_CALLS = CLIENT_FUNCTION_CALL_NAMES | {
    "adk_request_confirmation",
    "adk_request_credential",
    "adk_request_input",
}
# What FunctionTool.run_async answers, without calling the function, when its own argument
# handling refuses the call (pinned by tests/test_adk_calls.py against the installed ADK).
_ADK_REFUSALS = (
    ("failed due to argument validation errors", "its arguments failed ADK's validation"),
    (
        "failed as the following mandatory input parameters are not present",
        "an argument is missing",
    ),
)


# What ADK's confirmation gate answers, without running the tool, for a call whose
# confirmation the client denied (pinned by tests/test_adk_calls.py against the installed ADK).
_ADK_DENIED = {"error": "This tool call is rejected."}


def is_unknown(tool: BaseTool) -> bool:
    """The stand-in ADK passes to the before-tool callbacks for a name no tool has: a bare
    ``BaseTool`` (every real tool is a subclass; the base cannot run)."""
    return type(tool) is BaseTool


def declare(guard: tg.Guard, tool: BaseTool, contracts: Mapping[str, tg.ToolOptions]) -> None:
    """Make ``tool`` known to the guard: the user's own declaration of that name if there is
    one, else its contract from ``contracts`` over the JSON Schema the model was shown."""
    name = tool.name
    if guard.has_tool(name):
        return
    contract: dict[str, Any] = dict(contracts.get(name, {}))
    if "json_schema" not in contract and "args_model" not in contract:
        contract["json_schema"] = _parameters(tool)
    if tool.description:
        contract.setdefault("description", tool.description)
    try:
        guard.declare(name, **contract)
    except tg.ToolDefinitionError:
        # Another runner sharing this guard declared it in the meantime; otherwise the
        # contract itself is wrong, and the error says how.
        if not guard.has_tool(name):
            raise


def _parameters(tool: BaseTool) -> dict[str, Any]:
    """The arguments' JSON Schema from the tool's function declaration (what ADK sends to the
    model): ``parameters_json_schema``, or the ``parameters`` Schema converted."""
    try:
        declaration = tool._get_declaration()  # ADK's own hook for a tool's declaration
    except Exception:
        declaration = None
    if declaration is not None:
        if isinstance(declaration.parameters_json_schema, Mapping):
            return dict(declaration.parameters_json_schema)
        if declaration.parameters is not None:
            try:
                schema = declaration.parameters.json_schema.model_dump(
                    mode="json", exclude_none=True
                )
            except Exception:
                schema = None
            if isinstance(schema, dict):
                return schema
        else:
            return {"type": "object", "properties": {}}  # declared without arguments
    return {"type": "object"}  # nothing declared: ADK checks the arguments itself


def returns_dict(tool: BaseTool) -> bool | None:
    """Whether the tool's function is annotated to return a dict (True) or something else
    (False); None when it does not say (no annotation, ``Any``, a union of both, not a
    ``FunctionTool``). ADK wraps only a return that is not a dict, as ``{"result": value}``,
    so this tells a wrapped result from a dict of that one key the tool returned itself."""
    func = getattr(tool, "func", None)  # FunctionTool and its subclasses
    if not callable(func):
        return None
    try:
        hint = typing.get_type_hints(func).get("return")
    except Exception:  # an annotation that does not resolve: nothing known
        return None
    return _is_dict_type(hint)


def _is_dict_type(hint: Any) -> bool | None:
    if hint is None or hint is Any:
        return None
    if hint is type(None):
        return False
    origin = typing.get_origin(hint) or hint
    if origin is typing.Union or origin is types.UnionType:
        kinds = {_is_dict_type(member) for member in typing.get_args(hint)}
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(origin, type):
        return issubclass(origin, dict)  # ADK's own test (isinstance dict); a TypedDict too
    return None


def framework_span(guard: tg.Guard, tool: BaseTool) -> Span | None:
    """ADK's own span of this call (``execute_tool {name}``, current while the before-tool
    callbacks run): the guard's attributes go on it instead of on a second span."""
    if not guard.reuse_framework_spans:
        return None
    span = trace.get_current_span()
    if not span.is_recording():
        return None  # no tracer provider behind ADK's tracer: the guard opens its own
    scope = getattr(span, "instrumentation_scope", None)
    if getattr(span, "name", None) == f"execute_tool {tool.name}" and (
        scope is None or scope.name == _ADK_SCOPE
    ):
        return span
    return None


def refusal(tool: BaseTool, result: Any) -> str | None:
    """Why ADK answered the call without running the tool's function, or None."""
    if not isinstance(result, Mapping):
        return None
    error = result.get("error")
    if not isinstance(error, str) or not error.startswith(f"Invoking `{tool.name}()` "):
        return None
    for marker, why in _ADK_REFUSALS:
        if marker in error:
            return f"ADK refused the call to {shorten(tool.name)!r}: {why}"
    return None


def denied(tool_context: ToolContext, result: Any) -> bool:
    """Whether ADK's confirmation gate answered the call because the client denied it: the
    tool never ran. A tool that asks for its confirmation itself runs on a denial too, and
    its answer is its result."""
    confirmation = tool_context.tool_confirmation
    return confirmation is not None and not confirmation.confirmed and result == _ADK_DENIED


def shorten(name: str) -> str:
    return name if len(name) <= 128 else name[:128] + "…"
