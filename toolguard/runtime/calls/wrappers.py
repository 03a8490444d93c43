"""wrapt wrappers: a guarded function or method, and a guarded proxy of an object."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

import wrapt

from ..tools.tool import Tool
from .pipeline import Pipeline

if TYPE_CHECKING:
    from ..guard import Guard

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
        # The tool's call path, built once: called directly, the wrapper is its entry point.
        pipeline = Pipeline(guard, tool, fn, instance)
        super().__init__(fn, pipeline.direct)
        self._self_guard = guard
        self._self_tool = tool
        self._self_bound_to = instance
        self._self_pipeline = pipeline

    @property
    def toolguard_tool(self) -> Tool:
        return self._self_tool


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
