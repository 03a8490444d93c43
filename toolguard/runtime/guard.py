"""The Guard: wraps tools (decorator, register, proxy) and dispatches calls by name."""

from __future__ import annotations

import asyncio
import difflib
import logging
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, overload

import wrapt
from opentelemetry import trace

from .. import _contract as attr
from .._errors import ToolDefinitionError
from . import telemetry as tel
from .call import Call
from .conditions import Failure
from .schema import SchemaFailure, parse_arguments
from .tool import Mode, Tool, ToolSpec

logger = logging.getLogger("toolguard")

_SPEC_FIELDS = frozenset(ToolSpec.__dataclass_fields__) - {"_compiled"}


class Guard:
    """Checks every call of the tools it wraps, in the protocol's order.

    ``mode``: ``"block"`` (an invalid call does not run) or ``"log"`` (it runs and is
    recorded as ``logged``); tools may override it. ``rejection``: with ``"raise"`` a blocked
    call raises :class:`ToolCallRejected`; with ``"return"`` it returns a :class:`Rejection`
    the agent reads as the tool's answer (and a tool's exception comes back the same way).
    ``on_guard_error``: a predicate that raises fails its check (``"fail_closed"``) or is
    logged loudly and passed (``"fail_open"``). ``record_content`` opts in to recording
    argument and result values on spans (truncated). ``state`` is handed to predicates.
    """

    def __init__(
        self,
        *,
        mode: Mode = "block",
        state: Any = None,
        rejection: Literal["raise", "return"] = "raise",
        on_guard_error: Literal["fail_closed", "fail_open"] = "fail_closed",
        record_content: bool = False,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        if mode not in ("block", "log"):
            raise ValueError(f"mode must be 'block' or 'log', not {mode!r}")
        if rejection not in ("raise", "return"):
            raise ValueError(f"rejection must be 'raise' or 'return', not {rejection!r}")
        if on_guard_error not in ("fail_closed", "fail_open"):
            raise ValueError(
                f"on_guard_error must be 'fail_closed' or 'fail_open', not {on_guard_error!r}"
            )
        self.mode: Mode = mode
        self.state = state
        self.rejection = rejection
        self.fail_open = on_guard_error == "fail_open"
        self.record_content = record_content
        self.tracer = tel.get_tracer(tracer_provider)
        self.observes_outputs = False  # turned on by the first tool with grounded arguments
        self._tools: dict[str, tuple[Tool, Callable[..., Any]]] = {}

    # -- wrapping ----------------------------------------------------------------------------
    @overload
    def tool(self, fn: Callable[..., Any], /) -> Any: ...
    @overload
    def tool(self, fn: None = None, /, **options: Any) -> Callable[[Callable[..., Any]], Any]: ...

    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Decorator: ``@guard.tool`` or ``@guard.tool(requires=..., preconditions=...)``.

        Works on functions, async functions and methods (the instance is passed to
        predicates as ``instance``). Options are the fields of :class:`ToolSpec`.
        """
        if fn is None:
            return lambda f: self.register(f, **options)
        return self.register(fn, **options)

    def register(
        self,
        fn: Callable[..., Any],
        spec: ToolSpec | None = None,
        *,
        replace: bool = False,
        **options: Any,
    ) -> Any:
        """Guard ``fn`` and make it callable by name; returns the guarded callable."""
        spec = _spec(spec, options)
        tool = spec.compile(fn)
        # A bound method keeps its object: predicates asking for `instance` get it also when
        # the tool is dispatched by name (guard.call), not only when called directly.
        bound_to = fn.__self__ if isinstance(fn, types.MethodType) else None
        wrapper = _GuardedTool(fn, self, tool, instance=bound_to)
        if _is_unbound_method(fn):
            # Decorated in a class body: guarded on every instance, but there is no instance
            # to dispatch to by name (use guard.proxy(obj) or guard.register(obj.method)).
            return wrapper
        if hasattr(fn, "__self__") and spec.name is None:
            replace = True  # a bound method: a later instance of the class takes the name
        self._add(tool, wrapper, replace)
        return wrapper

    def proxy(
        self,
        obj: Any,
        tools: Iterable[str] | Mapping[str, ToolSpec | None] | None = None,
    ) -> Any:
        """A wrapt proxy of ``obj`` whose named methods are guarded (all public ones by
        default); everything else passes through. The methods become dispatchable by name,
        replacing those of an earlier proxy of the same names."""
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
            tool = spec.compile(method, default_name=name)
            wrapper = _GuardedTool(method, self, tool, instance=obj)
            self._add(tool, wrapper, replace=True)
            guarded[name] = wrapper
        return _GuardedProxy(obj, guarded)

    def _add(self, tool: Tool, wrapper: Callable[..., Any], replace: bool) -> None:
        if tool.name in self._tools and not replace:
            raise ToolDefinitionError(
                f"tool {tool.name!r} is already registered with this guard "
                "(pass replace=True, or name=... to register it under another name)"
            )
        self._tools[tool.name] = (tool, wrapper)
        if tool.grounded:
            self.observes_outputs = True

    @property
    def tool_names(self) -> list[str]:
        return sorted(self._tools)

    def get_tool(self, name: str) -> Tool:
        return self._tools[name][0]

    # -- dispatch by name --------------------------------------------------------------------
    def call(
        self,
        name: str,
        arguments: str | bytes | Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        step: int | None = None,
    ) -> Any:
        """Check and run tool ``name`` with raw ``arguments`` (a dict or JSON text)."""
        entry = self._tools.get(name)
        if entry is None:
            return self._unknown(name, call_id, step)
        tool, wrapper = entry
        try:
            raw = parse_arguments(name, arguments)
        except SchemaFailure as exc:
            call = Call(self, name, tool, None, step, call_id)
            call.reject_before(exc.failure)
            return call.finish_rejected()
        return wrapper._self_run(raw, call_id, step)

    async def acall(
        self,
        name: str,
        arguments: str | bytes | Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        step: int | None = None,
    ) -> Any:
        """:meth:`call` for agent loops that await; sync tools run inline."""
        result = self.call(name, arguments, call_id=call_id, step=step)
        if asyncio.iscoroutine(result):
            return await result
        return result

    async def acall_batch(
        self,
        calls: Sequence[tuple[str, str | Mapping[str, Any] | None]]
        | Sequence[tuple[str, str | Mapping[str, Any] | None, str | None]],
    ) -> list[Any]:
        """Parallel tool calls of one model turn: steps in list order, run concurrently."""
        from .trajectory import current_trajectory

        traj = current_trajectory()
        steps = [traj.next_step() if traj else None for _ in calls]
        coros = [
            self.acall(c[0], c[1], call_id=c[2] if len(c) > 2 else None, step=s)  # type: ignore[misc]
            for c, s in zip(calls, steps, strict=True)
        ]
        # Like acall: a rejection comes back as a value or raises; a tool's exception that the
        # mode re-raises propagates rather than hiding in the results list.
        return list(await asyncio.gather(*coros))

    def _unknown(self, name: str, call_id: str | None, step: int | None) -> Any:
        known = self.tool_names
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(f'`{c}`' for c in close)}?" if close else ""
        listed = ", ".join(f"`{k}`" for k in known[:30]) + (" ..." if len(known) > 30 else "")
        call = Call(self, name, None, None, step, call_id)
        call.reject_before(
            Failure(
                attr.SCHEMA,
                "schema.tool",
                f"no tool named {name!r} in the guarded tool set",
                f"There is no tool named `{name}`.{hint} Available tools: {listed}.",
            )
        )
        return call.finish_rejected()


def _is_unbound_method(fn: Callable[..., Any]) -> bool:
    import inspect

    if hasattr(fn, "__self__") or not inspect.isfunction(inspect.unwrap(fn)):
        return False
    params = list(inspect.signature(fn).parameters)
    return bool(params) and params[0] in ("self", "cls")


def _spec(spec: ToolSpec | None, options: Mapping[str, Any]) -> ToolSpec:
    unknown = set(options) - _SPEC_FIELDS
    if unknown:
        raise ToolDefinitionError(
            f"unknown tool option(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(_SPEC_FIELDS))}"
        )
    if spec is not None and options:
        raise ToolDefinitionError("pass either a ToolSpec or options, not both")
    return spec if spec is not None else ToolSpec(**options)


class _GuardedTool(wrapt.FunctionWrapper):  # type: ignore[misc]
    """A wrapt wrapper: keeps the signature; works for functions, methods and async ones."""

    def __init__(
        self, fn: Callable[..., Any], guard: Guard, tool: Tool, instance: Any = None
    ) -> None:
        super().__init__(fn, _make_wrapper(guard, tool, instance))
        self._self_guard = guard
        self._self_tool = tool
        self._self_bound_to = instance

    @property
    def toolguard_tool(self) -> Tool:
        return self._self_tool

    def _self_run(self, raw: dict[str, Any], call_id: str | None, step: int | None) -> Any:
        return _run(
            self._self_guard,
            self._self_tool,
            self.__wrapped__,
            self._self_bound_to,
            raw,
            call_id,
            step,
        )


def _make_wrapper(guard: Guard, tool: Tool, fixed_instance: Any) -> Callable[..., Any]:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            raw = tool.bind(args, kwargs)
        except TypeError as exc:
            return _bind_error(guard, tool, exc)
        owner = fixed_instance if fixed_instance is not None else instance
        return _run(guard, tool, wrapped, owner, raw, None, None)

    return wrapper


def _bind_error(guard: Guard, tool: Tool, exc: TypeError) -> Any:
    call = Call(guard, tool.name, tool, None, None, None)
    call.reject_before(
        Failure(
            attr.SCHEMA,
            "schema.args",
            f"{tool.name}: {exc}",
            f"The call to `{tool.name}` is malformed: {exc}. Call it with arguments matching "
            f"{tool.schema.hint}.",
        )
    )
    return call.finish_rejected()


def _run(
    guard: Guard,
    tool: Tool,
    fn: Callable[..., Any],
    instance: Any,
    raw: dict[str, Any],
    call_id: str | None,
    step: int | None,
) -> Any:
    call = Call(guard, tool.name, tool, instance, step, call_id)
    call.check(raw)
    if call.blocked:
        if tool.is_async:
            return _async_value(call.finish_rejected)
        return call.finish_rejected()
    args, kwargs = call.call_parts()
    if tool.is_async:
        return _run_async(call, fn, args, kwargs)
    call.enter()
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        return call.finish_raised(exc)
    return call.finish_returned(result)


async def _run_async(
    call: Call, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
) -> Any:
    call.enter()
    try:
        result = await fn(*args, **kwargs)
    except BaseException as exc:
        return call.finish_raised(exc)
    return call.finish_returned(result)


async def _async_value(finish: Callable[[], Any]) -> Any:
    return finish()


class _GuardedProxy(wrapt.ObjectProxy):  # type: ignore[misc]
    """Guards chosen methods of an existing object without editing its class."""

    def __init__(self, wrapped: Any, tools: Mapping[str, _GuardedTool]) -> None:
        super().__init__(wrapped)
        self._self_tools = dict(tools)

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_self_"):
            tools = self._self_tools
            if name in tools:
                return tools[name]
        return super().__getattr__(name)
