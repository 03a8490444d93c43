"""LangChain tools as contracts of the guard: the schema comes from the tool itself."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, TypeGuard, Unpack

import toolguard as tg

from ._framework import BaseTool

if TYPE_CHECKING:
    from pydantic import BaseModel


def declare_tool(
    guard: tg.Guard, tool: BaseTool, *, replace: bool = False, **options: Unpack[tg.ToolOptions]
) -> tg.Tool:
    """Declare a LangChain tool on ``guard`` under its name, with the argument schema the
    model is shown (``tool.tool_call_schema``: injected arguments left out) and the given
    contract (``refs=``, ``produces=``, ``invalidates=``, ``preconditions=``, ...).

    The framework keeps running the tool; the guard judges its calls."""
    contract: dict[str, Any] = dict(options)
    if not isinstance(tool, BaseTool):
        raise TypeError(f"declare_tool() needs a LangChain BaseTool, got {type(tool).__name__}")
    if "json_schema" in contract or "args_model" in contract:
        return guard.declare(tool.name, replace=replace, **contract)
    contract.setdefault("description", tool.description or None)
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        return guard.declare(tool.name, json_schema=schema, replace=replace, **contract)
    if _is_pydantic_v2_model(schema):
        # The very model LangChain validates with: the guard and the framework agree on what
        # a well-formed call is (the guard's strict mode aside).
        return guard.declare(tool.name, args_model=schema, replace=replace, **contract)
    from langchain_core.utils.function_calling import convert_to_openai_tool

    parameters = convert_to_openai_tool(tool)["function"]["parameters"]
    return guard.declare(tool.name, json_schema=parameters, replace=replace, **contract)


def _is_pydantic_v2_model(schema: Any) -> TypeGuard[type[BaseModel]]:
    from pydantic import BaseModel

    return isinstance(schema, type) and issubclass(schema, BaseModel)


class KnownTools:
    """Which tool names the guard judges, declaring a framework tool on first sight when
    asked to. Tool nodes run calls in threads, hence the lock around declaring."""

    def __init__(self, guard: tg.Guard, declare: bool) -> None:
        self.guard = guard
        self.declare = declare
        self._names: set[str] = set()
        self._lock = threading.Lock()

    def knows(self, name: str) -> bool:
        if name in self._names:
            return True
        try:
            self.guard.get_tool(name)
        except KeyError:
            return False
        self._names.add(name)
        return True

    def ensure(self, tool: BaseTool) -> None:
        """Make sure the guard judges ``tool``: the user's declaration by the same name wins;
        otherwise (when declaring is on) its schema with no dependencies."""
        name = tool.name
        if name in self._names or not self.declare:
            return
        with self._lock:
            if self.knows(name):
                return
            declare_tool(self.guard, tool)
            self._names.add(name)
