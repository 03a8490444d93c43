"""Each tool's call path compiled once, when the tool is declared, from its contract.

The general path (``PendingCall`` with ``checks.py``) reads every declaration at every call
and pays a Python call for each step: about 45 per guarded call. This module writes, for one
:class:`Tool`, the Python source of the same pipeline specialised to what the tool declares
(its references, its conditions with their parameters resolved, its grounded arguments, its
``produces`` places, its schema's validator) and compiles it with ``exec``: one function per
entry point (the wrapped function called directly, dispatch by name, the two-phase check),
straight-line code in between, no loop over declarations and no Python call the general path
does not also make to user code.

One source of truth: the source is generated from the same compiled :class:`Tool` the
general path reads, and every failure is built by the same function of ``checks.py`` (the
message texts exist once). What differs is only the control flow around them, and
``tests/runtime/test_compiled_equivalence.py`` (hypothesis) runs random contracts and random call
sequences through both and compares verdicts, T, FED, causes, bindings and span attributes.

Anything unusual takes the general path, decided before the call has any effect: log mode,
``record_content``, a call nested in another guarded call, no trajectory while others are
open (the warning), an ended trajectory, a framework span to reuse (after the step is taken:
then the general path continues from a ``PendingCall`` holding that step). Whatever happens
after the checks but the plain success (a rejection, an exception, an environment error, a
failed postcondition, an ended trajectory) is closed by ``PendingCall`` itself, made from
the call's state: the rare outcomes keep one implementation.

A tool the compiler does not cover (a JSON Schema without properties, a condition taking
``**kwargs`` or a condition class overriding ``evaluate``) is not compiled: all its calls take
the general path.

The source is written by ``compiled_source`` (the checks) and ``compiled_calls`` (the entry
points); ``compiled_runtime`` holds what the generated code calls.
"""

from __future__ import annotations

import itertools
import linecache
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .call import PendingCall
from .compiled_calls import emit_make_direct, emit_make_dispatch
from .compiled_runtime import RUNTIME, binder
from .compiled_source import Source, emit_run_checks
from .conditions import _Condition
from .tool import Tool

if TYPE_CHECKING:
    pass

logger = logging.getLogger("toolguard")

ENABLED = True  # a guard made while False takes the general path for every call (tests)

_counter = itertools.count()
_CODE: dict[str, Any] = {}  # generated source -> its code object


class CompiledTool:
    """The generated entry points of one tool; see :func:`compile_tool`."""

    def __init__(self, tool: Tool, source: str, namespace: dict[str, Any]) -> None:
        self.tool = tool
        self.source = source
        self.make_direct: Callable[..., Callable[..., Any]] = namespace["make_direct"]
        self.make_dispatch: Callable[..., Callable[..., Any]] = namespace["make_dispatch"]
        self.run_checks: Callable[[PendingCall, dict[str, Any]], None] = namespace["run_checks"]

    def __repr__(self) -> str:
        return f"CompiledTool({self.tool.name!r})"


def compile_tool(tool: Tool) -> CompiledTool | None:
    """The tool's compiled pipeline (built once per Tool), or None when not covered."""
    cached = tool._compiled_code
    if cached is not False:
        return cached  # type: ignore[no-any-return]
    compiled = _compile(tool) if _covered(tool) else None
    tool._compiled_code = compiled
    return compiled


def _covered(tool: Tool) -> bool:
    if tool.needs_general_path:  # a dry run or a tg.State parameter: call.py and dryrun.py
        return False
    names = tool.schema.names
    for condition in (*tool.preconditions, *tool.postconditions):
        if names is None or condition._takes_kwargs:
            return False
        kind = type(condition)
        if kind.evaluate is not _Condition.evaluate or kind.describe is not _Condition.describe:
            return False
    return True


# -- the generated source ---------------------------------------------------------------------


def _compile(tool: Tool) -> CompiledTool:
    src = Source()
    src.env.update(RUNTIME)
    src.env.update(binder(tool))
    src.env.update(TOOL=tool, SPEC=tool.spec, NAME=tool.name)
    emit_run_checks(src, tool)
    emit_make_direct(src, tool)
    emit_make_dispatch(src, tool)
    source = "\n".join(src.lines) + "\n"
    # The source depends only on the contract's shape (names, kinds, check ids; the values
    # are in the namespace), so tools of one shape share one code object: a guard of 10,000
    # tools compiles a few sources, not 10,000.
    code = _CODE.get(source)
    if code is None:
        filename = f"<toolguard compiled #{next(_counter)}>"
        # Tracebacks through the generated code show its lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile(source, filename, "exec")
        if len(_CODE) < 4096:
            _CODE[source] = code
    namespace = dict(src.env)
    exec(code, namespace)
    return CompiledTool(tool, source, namespace)
