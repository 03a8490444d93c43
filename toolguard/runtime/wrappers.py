"""wrapt wrappers: a guarded function or method, and a guarded proxy of an object."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

import wrapt

from .._errors import ToolCallRejected
from . import dryrun, transaction
from .call import PendingCall
from .checks import bind_failure
from .compiled import compile_tool
from .compiled_runtime import raise_async
from .tool import Tool

if TYPE_CHECKING:
    from .guard import Guard

P = ParamSpec("P")
R = TypeVar("R", covariant=True)


class GuardedFunction(Protocol, Generic[P, R]):
    """What ``@guard.tool`` returns: the function, with the same signature and return type
    (a rejected call raises :class:`ToolCallRejected`), and its compiled :class:`Tool`."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    @property
    def toolguard_tool(self) -> Tool: ...


class GuardedTool(wrapt.FunctionWrapper):  # type: ignore[type-arg]
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


def _make_wrapper(guard: Guard, tool: Tool, fixed_instance: Any) -> Callable[..., Any]:
    def proceed(
        pending: PendingCall,
        wrapped: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        try:
            raw = tool.bind(args, kwargs)
        except TypeError as exc:
            pending.reject(bind_failure(tool, exc))
        else:
            if tool.state_param is not None:  # a direct call may pass its state by keyword
                pending.take_state(raw)
            try:
                pending.run_checks(raw)
            except BaseException:  # Ctrl-C inside a predicate: the call is cancelled
                if not pending.done:
                    pending.cancel()
                raise
        if pending.rejection is not None:
            if tool.is_async:
                return raise_async(pending.rejection)
            raise ToolCallRejected(pending.rejection)
        return execute(pending, wrapped, dispatch=False)

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        owner = fixed_instance if fixed_instance is not None else instance
        return proceed(PendingCall(guard, tool.name, tool, owner), wrapped, args, kwargs)

    # The tool's compiled call path (compiled.py), which takes `wrapper` for the unusual.
    code = compile_tool(tool) if guard._compiled else None
    if code is None:
        return wrapper
    return code.make_direct(guard, fixed_instance, wrapper, proceed)


def execute(pending: PendingCall, fn: Callable[..., Any], *, dispatch: bool) -> Any:
    """Run an admitted call's function and close the call. ``dispatch``: a tool's exception
    comes back as the :class:`Rejection` the agent reads; otherwise it is re-raised."""
    tool = pending.tool
    assert tool is not None
    if tool.is_async:
        return _execute_async(pending, fn, dispatch)
    if tool.dry_run is not None:
        if transaction.applies(tool):  # the dry run is the call itself
            done = transaction.run(pending, fn, dispatch)
            if done is not transaction.RUN_PLAIN:
                return done
        elif not dryrun.try_on_fork(pending, fn):
            return _blocked(pending, dispatch)
    args, kwargs = pending.call_parts()
    pending.enter()
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        rejection = pending.fail(exc)
        if dispatch and isinstance(exc, Exception):
            return rejection
        raise
    pending.finish(result)
    return result


async def _execute_async(pending: PendingCall, fn: Callable[..., Any], dispatch: bool) -> Any:
    tool = pending.tool
    if tool is not None and tool.dry_run is not None:
        if transaction.applies(tool):
            done = await transaction.arun(pending, fn, dispatch)
            if done is not transaction.RUN_PLAIN:
                return done
        elif not await dryrun.atry_on_fork(pending, fn):
            return _blocked(pending, dispatch)
    args, kwargs = pending.call_parts()
    pending.enter()
    try:
        result = await fn(*args, **kwargs)
    except BaseException as exc:
        rejection = pending.fail(exc)
        if dispatch and isinstance(exc, Exception):
            return rejection
        raise
    pending.finish(result)
    return result


def _blocked(pending: PendingCall, dispatch: bool) -> Any:
    """A call its dry run blocked: the rejection for dispatch, raised for a direct call."""
    rejection = pending.rejection
    assert rejection is not None
    if dispatch:
        return rejection
    raise ToolCallRejected(rejection)


class GuardedProxy(wrapt.ObjectProxy):  # type: ignore[type-arg]
    """Guards chosen methods of an existing object without editing its class."""

    def __init__(self, wrapped: Any, tools: Mapping[str, GuardedTool]) -> None:
        super().__init__(wrapped)
        self._self_tools = dict(tools)

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_self_"):
            tools = self._self_tools
            if name in tools:
                return tools[name]
        return super().__getattr__(name)
