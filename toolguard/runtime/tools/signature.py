"""Argument schemas from a function's signature: a pydantic model of its parameters, built
once when the tool is wrapped, whose values are what the function would get unguarded
(pydantic's conversion, and a left-out parameter's own default object)."""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from collections.abc import Callable
from typing import Annotated, Any

import pydantic
from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo

from ..._errors import ToolDefinitionError
from .markers import Grounded, Ref
from .schema import ArgumentSchema, from_model


def _skip_first(fn: Callable[..., Any], params: list[inspect.Parameter]) -> list[inspect.Parameter]:
    # A function decorated inside a class body still lists self/cls; the guard receives the
    # instance separately (wrapt), so the schema is over the remaining parameters. Anywhere
    # else (a module's function, a bound method) a first `cls` or `self` is an argument.
    if params and params[0].name in ("self", "cls") and defined_in_class_body(fn):
        return params[1:]
    return params


def defined_in_class_body(fn: Callable[..., Any]) -> bool:
    """A plain function written in a class body (``Service.run``, not yet bound): its
    qualified name's parent is a class, not a module or a function's ``<locals>``."""
    target = inspect.unwrap(fn)
    if not inspect.isfunction(target):
        return False  # a bound method or a callable object: inspect already left self out
    parent = target.__qualname__.rpartition(".")[0]
    return bool(parent) and not parent.endswith("<locals>")


def signature_parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    return _skip_first(fn, list(inspect.signature(fn).parameters.values()))


# Defaults pydantic hands over as they are; any other it deep-copies on every call, where
# Python hands the function its one default object (a shared cache, a sentinel).
_KEPT_DEFAULTS = (type(None), bool, int, float, complex, str, bytes)


def _field_name(name: str, taken: set[str]) -> str | None:
    """A name pydantic takes as a field for parameter ``name`` (which it is an alias of),
    or None where ``name`` itself is one: pydantic makes ``_x`` a private attribute and
    ``model_config`` the configuration, refuses ``model_dump`` and warns about ``json``."""
    if not (name.startswith(("_", "model_")) or hasattr(BaseModel, name)):
        return None
    field = f"tg_argument_{len(taken)}"
    while field in taken or hasattr(BaseModel, field):
        field += "_"
    taken.add(field)
    return field


def from_signature(
    tool: str, fn: Callable[..., Any], *, strict: bool = True, hidden: tuple[str, ...] = ()
) -> ArgumentSchema:
    """``hidden``: parameters the guard fills itself (a ``tg.State``), not in the schema."""
    try:
        params = [p for p in signature_parameters(fn) if p.name not in hidden]
        hints = _resolved_hints(fn)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolDefinitionError(f"tool {tool!r}: cannot read its signature: {exc}") from exc
    fields: dict[str, Any] = {}
    extra, extra_type = "forbid", Any
    taken = {p.name for p in params}
    renamed: dict[str, str] = {}  # field -> parameter, for names pydantic keeps for itself
    for p in params:
        markers = _guard_markers(hints.get(p.name))
        if p.kind is p.VAR_KEYWORD:
            if markers:
                raise ToolDefinitionError(
                    f"tool {tool!r}: **{p.name} is annotated with {markers[0]!r}, which the "
                    "guard cannot check: it checks arguments by their parameter's name, and "
                    "**kwargs holds any names. Name the parameters (or take them as *args)"
                )
            extra = "allow"
            extra_type = hints.get(p.name, Any)
            continue
        annotation = hints.get(p.name, Any)
        field = _field_name(p.name, taken)
        if field is not None:
            renamed[field] = p.name
            annotation = Annotated[annotation, pydantic.Field(alias=p.name)]
        if p.kind is p.VAR_POSITIONAL:
            # A marker on each value of *args is one on the argument, whose values (a
            # tuple) the checks read one by one.
            values: Any = tuple[annotation, ...]  # type: ignore[valid-type]
            if markers:
                values = Annotated[values, *markers]
            fields[field or p.name] = (values, ())
            continue
        default = ... if p.default is p.empty else p.default
        fields[field or p.name] = (annotation, default)
    config = ConfigDict(extra=extra, arbitrary_types_allowed=True)  # type: ignore[typeddict-item]
    try:
        model = pydantic.create_model(
            f"{tool}_arguments", __base__=_arguments_base(config, extra_type), **fields
        )
    except Exception as exc:
        raise ToolDefinitionError(
            f"tool {tool!r}: cannot build its argument schema: {exc}"
        ) from exc
    try:
        schema = from_model(
            tool, model, keep_extra=extra == "allow", strict=strict, renamed=renamed
        )
    except ToolDefinitionError:
        _undefined(tool, params, hints)
        raise
    shared = [
        (p.name, p.default)
        for p in params
        if p.default is not p.empty
        and type(p.default) not in _KEPT_DEFAULTS
        and not isinstance(p.default, FieldInfo)  # pydantic's default, not Python's
    ]
    if shared:
        copying = schema.validate

        def validate(args: dict[str, Any]) -> dict[str, Any]:
            values = copying(args)
            for name, default in shared:
                if name not in args:
                    values[name] = default
            return values

        schema.validate = validate
    return schema


def _undefined(tool: str, params: list[inspect.Parameter], hints: dict[str, Any]) -> None:
    """A ToolDefinitionError naming the first parameter whose annotation did not resolve
    (a class defined after the tool is declared), if any: pydantic's own advice
    (``model_rebuild()``) names a model the user never sees."""
    for p in params:
        annotation = hints.get(p.name)
        if isinstance(annotation, typing.ForwardRef):
            annotation = annotation.__forward_arg__
        if isinstance(annotation, str):
            raise ToolDefinitionError(
                f"tool {tool!r}: the annotation of argument {p.name!r} ({annotation!r}) names "
                "something not defined when the tool is declared, and the guard builds the "
                "argument schema then: declare the tool once it is defined (decorate a "
                "function defined after it, or call guard.register(fn) later)"
            )


def _guard_markers(annotation: Any) -> tuple[Any, ...]:
    """The guard's own markers (``tg.Ref``, ``tg.Grounded``) on an ``Annotated`` type."""
    return tuple(
        m
        for m in getattr(annotation, "__metadata__", ())
        if isinstance(m, Ref | Grounded) or m is Grounded
    )


def _arguments_base(config: ConfigDict, extra_type: Any) -> type[BaseModel]:
    """The model's base: its configuration, and the type of a ``**kwargs: T`` value (each
    extra argument validated and converted as one, as ``validate_call`` does)."""
    namespace: dict[str, Any] = {"model_config": config, "__module__": __name__}
    if extra_type is not Any:
        namespace["__annotations__"] = {"__pydantic_extra__": dict[str, extra_type]}
    return type("Arguments", (BaseModel,), namespace)


def _resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target = _annotated_function(fn)
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:
        pass
    # One annotation that does not resolve (a return type imported under TYPE_CHECKING
    # only) leaves the others to resolve each on its own; the return type is no argument.
    raw = getattr(target, "__annotations__", None)
    if not isinstance(raw, dict):
        return {}
    scope = getattr(inspect.unwrap(target), "__globals__", {})
    local: dict[str, Any] | None = None
    hints: dict[str, Any] = {}
    for name, annotation in raw.items():
        if name == "return":
            continue
        try:
            hints[name] = _resolve(annotation, scope, None)
        except Exception:
            # A name only the code registering the tool sees (a class defined in a function,
            # under `from __future__ import annotations`), as pydantic's validate_call finds it.
            local = _registering_locals() if local is None else local
            try:
                hints[name] = _resolve(annotation, scope, local)
            except Exception:
                hints[name] = annotation  # left to pydantic, which names what is undefined
    return hints


class _One:
    """One annotation where ``typing.get_type_hints`` reads it, in its function's globals."""

    def __init__(self, annotation: Any, scope: dict[str, Any]) -> None:
        self.__annotations__ = {"value": annotation}
        self.__globals__ = scope


def _resolve(annotation: Any, scope: dict[str, Any], local: dict[str, Any] | None) -> Any:
    return typing.get_type_hints(_One(annotation, scope), localns=local, include_extras=True)[
        "value"
    ]


def _annotated_function(fn: Callable[..., Any]) -> Any:
    """Where ``fn``'s parameter annotations are: the function a ``functools.partial``
    wraps, a callable object's ``__call__`` (the instance's own ``__annotations__`` are its
    class's attributes)."""
    target = inspect.unwrap(fn)
    while isinstance(target, functools.partial):
        target = inspect.unwrap(target.func)
    if inspect.isroutine(target) or isinstance(target, type):
        return target
    call = inspect.getattr_static(type(target), "__call__", None)
    return call if inspect.isfunction(call) else target


def _registering_locals() -> dict[str, Any]:
    """The local names of the nearest caller outside toolguard: where the tool is declared."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("toolguard"):
        frame = frame.f_back  # type: ignore[assignment]
    return dict(frame.f_locals) if frame is not None else {}
