"""LangChain tools as contracts of the guard: the schema comes from the tool itself."""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeGuard, Unpack

import toolguard as tg

from ._framework import BaseTool, RunnableConfig, Tool

if TYPE_CHECKING:
    from pydantic import BaseModel

logger = logging.getLogger("toolguard")


def declare_tool(
    guard: tg.Guard, tool: BaseTool, *, replace: bool = False, **options: Unpack[tg.ToolOptions]
) -> tg.Tool:
    """Declare a LangChain tool on ``guard`` under its name, with the argument schema the
    model is shown (``tool.tool_call_schema``) less every argument LangChain or the app
    injects, and the given contract (``refs=``, ``produces=``, ``invalidates=``,
    ``preconditions=``, ...).

    An injected argument (a ``RunnableConfig`` parameter, ``run_manager``, ``callbacks``,
    ``InjectedToolArg`` / ``InjectedToolCallId`` / ``InjectedState`` / ``InjectedStore``,
    ``ToolRuntime``) is never required and never judged, even where LangChain shows it to the
    model (the ``config`` of a ``BaseTool`` subclass without ``args_schema``): it is filled
    in after the guard's check, so no value the call holds for it makes the call illegal.
    A single-input ``Tool`` is judged by the one string argument LangChain shows (``__arg1``).

    The framework keeps running the tool; the guard judges its calls."""
    contract: dict[str, Any] = dict(options)
    if not isinstance(tool, BaseTool):
        raise TypeError(f"declare_tool() needs a LangChain BaseTool, got {type(tool).__name__}")
    if "json_schema" in contract or "args_model" in contract:
        return guard.declare(tool.name, replace=replace, **contract)
    contract.setdefault("description", tool.description or None)
    schema = None if _single_input(tool) else tool.tool_call_schema
    if isinstance(schema, dict):
        return guard.declare(tool.name, json_schema=schema, replace=replace, **contract)
    if _is_pydantic_v2_model(schema):
        # The very model LangChain validates with (less what it injects): the guard and the
        # framework agree on what a well-formed call is (the guard's strict mode aside).
        model = _tolerating(schema, injected_arguments(tool, schema))
        return guard.declare(tool.name, args_model=model, replace=replace, **contract)
    from langchain_core.utils.function_calling import convert_to_openai_tool

    parameters = convert_to_openai_tool(tool)["function"]["parameters"]
    return guard.declare(tool.name, json_schema=parameters, replace=replace, **contract)


def _single_input(tool: BaseTool) -> bool:
    """A ``Tool`` without ``args_schema``: LangChain shows the model one string argument
    (``__arg1``) and runs the function with the call's one value, while its
    ``tool_call_schema`` describes ``Tool._run`` (``args``, a required ``config``, ...)."""
    return isinstance(tool, Tool) and not tool.args_schema


# What LangChain passes a tool's run function itself (``langchain_core.tools.base``'s
# FILTERED_ARGS), whatever the call holds.
_RUN_ARGUMENTS = ("run_manager", "callbacks")


def injected_arguments(tool: BaseTool, call_schema: type[BaseModel]) -> frozenset[str]:
    """The arguments of ``tool`` that are filled in after the guard's check, not by the
    model: those LangChain leaves out of ``tool_call_schema`` for being injected (the fields
    of the full input schema it drops), and the parameters of the functions it runs that it
    fills in or drops itself (``run_manager``, ``callbacks``, one annotated
    ``RunnableConfig``: LangChain tells that one by its type alone, as here)."""
    names: set[str] = set()
    with _suppressed():
        full = tool.get_input_schema()
        if _is_pydantic_v2_model(full):
            names.update(set(full.model_fields) - set(call_schema.model_fields))
    for fn in _run_functions(tool):
        with _suppressed():
            params = inspect.signature(fn).parameters
            names.update(n for n in _RUN_ARGUMENTS if n in params)
        with _suppressed():  # unresolvable hints: LangChain then passes no config either
            hints = typing.get_type_hints(fn)
            names.update(n for n, hint in hints.items() if hint is RunnableConfig)
    return frozenset(names)


def _run_functions(tool: BaseTool) -> list[Callable[..., Any]]:
    """The functions LangChain reads for what to pass: a function tool's own (its ``_run``
    is generic), else the tool's ``_run`` / ``_arun``."""
    wrapped = [fn for fn in (getattr(tool, "func", None), getattr(tool, "coroutine", None)) if fn]
    return wrapped if wrapped else [tool._run, tool._arun]


def _suppressed() -> contextlib.suppress:
    # A tool whose schema or signature cannot be read: nothing more is tolerated than it
    # shows (LangChain's own look-ups fail the same way and pass nothing).
    return contextlib.suppress(Exception)


def _tolerating(schema: type[BaseModel], names: frozenset[str]) -> type[BaseModel]:
    """``schema`` where each of ``names`` is optional, takes any value, and is left out of
    the JSON Schema (so of the hint a rejection gives): the model may send one (it was
    shown ``config``) or not; the framework replaces it either way. The model's own fields,
    validators and config are inherited."""
    if not names:
        return schema
    from pydantic import BaseModel, create_model
    from pydantic.json_schema import SkipJsonSchema

    hidden = Annotated[Any, SkipJsonSchema()]
    fields: dict[str, Any] = {name: (hidden, None) for name in sorted(names)}
    model: type[BaseModel] = create_model(schema.__name__, __base__=schema, **fields)
    # LangChain caches a tool_call_schema's JSON Schema through a method bound to that
    # class, which the subclass would inherit (and show ``config`` again): pydantic's own.
    setattr(model, "model_json_schema", vars(BaseModel)["model_json_schema"])  # noqa: B010
    return model


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
        self._undeclarable: dict[str, str] = {}  # tool name -> why the guard cannot judge it
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

    def ensure(self, tool: BaseTool) -> str | None:
        """Make sure the guard judges ``tool``: the user's declaration by the same name wins;
        otherwise (when declaring is on) its schema with no dependencies. Returns what is
        wrong with its schema when its calls must be refused, or None.

        A schema LangChain runs with but the guard cannot compile (a JSON Schema dict with
        ``"required": true`` on a property, as some MCP servers send) is a guard error found
        mid-run, where raising would crash the agent: failing closed (the default), the
        tool's calls are refused, each with the reason; failing open
        (``on_guard_error="fail_open"``), the tool is declared to take any arguments, so its
        calls run, with everything but their arguments judged. Logged once per tool."""
        name = tool.name
        if name in self._names or not self.declare:
            return None
        with self._lock:
            if self.knows(name):
                return None
            if name in self._undeclarable:
                return self._undeclarable[name]
            try:
                declare_tool(self.guard, tool)
            except Exception as exc:
                return self._cannot_declare(tool, exc)
            self._names.add(name)
        return None

    def _cannot_declare(self, tool: BaseTool, exc: Exception) -> str | None:
        # Under the lock.
        name = tool.name
        if self.knows(name):  # the user declared it meanwhile: theirs is judged
            return None
        problem = _schema_problem(name, exc)
        # An unforeseen exception is a bug to report: its traceback says where.
        trace = None if isinstance(exc, tg.ToolDefinitionError) else exc
        fix = (
            "declare it with a schema the guard accepts: declare_tool(guard, tool, json_schema=...)"
        )
        if self.guard.fail_open and self._declare_open(tool):
            logger.warning(
                "toolguard: %s; failing open, its calls run with their arguments unchecked (%s)",
                undeclarable(name, problem),
                fix,
                exc_info=trace,
            )
            return None
        logger.error(
            "toolguard: %s; its calls are refused (%s)",
            undeclarable(name, problem),
            fix,
            exc_info=trace,
        )
        self._undeclarable[name] = problem
        return problem

    def _declare_open(self, tool: BaseTool) -> bool:
        # Under the lock: the tool taking any arguments (the MCP proxy's on_undeclarable).
        try:
            declare_tool(self.guard, tool, json_schema={})
        except Exception:
            return False
        self._names.add(tool.name)
        return True


def undeclarable(name: str, problem: str) -> str:
    """The developer's text for a tool ``ensure`` refused: which tool, and what is wrong."""
    return f"tool {name!r}: the guard cannot judge its calls by its argument schema: {problem}"


def _schema_problem(name: str, exc: Exception) -> str:
    # What is wrong, without the tool's name (a ToolDefinitionError starts with it).
    text = str(exc).removeprefix(f"tool {name!r}: ")
    return text if isinstance(exc, tg.ToolDefinitionError) else f"{type(exc).__name__}: {text}"
