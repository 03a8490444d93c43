"""How a tool joins a guard: :meth:`Guard.register` (and its decorator), :meth:`Guard.declare`
and :meth:`Guard.proxy`. Each compiles the tool's contract once, wraps the function (when
the guard runs it) and adds the tool, with its call path, to the guard's tools by name.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._errors import ToolDefinitionError
from .calls.pipeline import Pipeline
from .calls.wrappers import GuardedProxy, GuardedTool
from .tools.signature import defined_in_class_body
from .tools.spec import ToolOptions, ToolSpec, spec_from
from .tools.tool import Tool

if TYPE_CHECKING:
    from .guard import Guard


def register(
    guard: Guard,
    fn: Callable[..., Any],
    spec: ToolSpec | None,
    name: str | None,
    replace: bool,
    options: ToolOptions,
) -> GuardedTool:
    """:meth:`Guard.register`: ``fn`` guarded, and callable by name unless it is a method
    decorated in a class body."""
    if not callable(fn):
        raise ToolDefinitionError(f"register() needs a callable, got {type(fn).__name__}")
    spec = spec_from(spec, options if name is None else {**options, "name": name})
    tool = spec.compile(fn, strict=guard.strict, dry_run=guard.dry_run)
    # A bound method keeps its object: predicates asking for `instance` get it also when
    # the tool is dispatched by name (guard.call), not only when called directly.
    bound_to = fn.__self__ if isinstance(fn, types.MethodType) else None
    wrapper = GuardedTool(fn, guard, tool, instance=bound_to)
    if _is_unbound_method(fn):
        # Decorated in a class body: guarded on every instance, but there is no instance
        # to dispatch to by name (use guard.proxy(obj) or guard.register(obj.method)).
        return wrapper
    if hasattr(fn, "__self__") and spec.name is None:
        replace = True  # a bound method: a later instance of the class takes the name
    add(guard, tool, wrapper, replace)
    return wrapper


def declare(
    guard: Guard, name: str, spec: ToolSpec | None, replace: bool, options: ToolOptions
) -> Tool:
    """:meth:`Guard.declare`: a tool known by its contract alone, run by its owner."""
    spec = spec_from(spec, {**options, "name": name} if spec is None else options)
    if spec.name != name:
        # The tool is known by the name given here; the caller's spec is left as it was.
        spec = dataclasses.replace(spec, name=name)
    tool = spec.compile(None, strict=guard.strict, dry_run=guard.dry_run)
    add(guard, tool, None, replace)
    return tool


def proxy(
    guard: Guard,
    obj: Any,
    tools: Iterable[str] | Mapping[str, ToolSpec | None] | None,
) -> Any:
    """:meth:`Guard.proxy`: a wrapt proxy of ``obj`` whose named methods are guarded."""
    if tools is None:
        names: Mapping[str, ToolSpec | None] = dict.fromkeys(
            n for n in dir(type(obj)) if not n.startswith("_") and callable(getattr(obj, n))
        )
    elif isinstance(tools, Mapping):
        names = tools
    else:
        names = dict.fromkeys(tools)
    guarded = {}
    for name, spec in names.items():
        method = getattr(obj, name, None)
        if not callable(method):
            raise ToolDefinitionError(f"proxy of {type(obj).__name__}: no method {name!r}")
        spec = spec or ToolSpec()
        tool = spec.compile(method, default_name=name, strict=guard.strict, dry_run=guard.dry_run)
        wrapper = GuardedTool(method, guard, tool, instance=obj)
        add(guard, tool, wrapper, replace=True)
        guarded[name] = wrapper
    return GuardedProxy(obj, guarded)


def add(guard: Guard, tool: Tool, wrapper: GuardedTool | None, replace: bool) -> None:
    """``tool`` known to ``guard`` by its name, with its call path (the wrapper's, or one
    for a tool declared by contract alone)."""
    if tool.state_param is not None and guard.state is None:
        raise ToolDefinitionError(
            f"tool {tool.name!r} takes the guard's state (parameter {tool.state_param!r}, "
            "tg.State), but this guard has none: pass Guard(state=...)"
        )
    if tool.name in guard._tools and not replace:
        raise ToolDefinitionError(
            f"tool {tool.name!r} is already registered with this guard "
            "(pass replace=True, or name=... to register it under another name)"
        )
    guard._tools[tool.name] = (tool, wrapper)
    guard._suggest.add(tool.name)
    if tool.grounded:
        guard.observes_outputs = True
    guard._pipelines[tool.name] = (
        wrapper._self_pipeline if wrapper is not None else Pipeline(guard, tool, None, None)
    )


def _is_unbound_method(fn: Callable[..., Any]) -> bool:
    """A function whose first parameter is ``self`` or ``cls``: a method decorated in its
    class body, not yet bound to an instance."""
    if hasattr(fn, "__self__") or not defined_in_class_body(fn):
        return False  # a module function may name its first parameter `cls` (a class label)
    params = list(inspect.signature(fn).parameters)
    return bool(params) and params[0] in ("self", "cls")
