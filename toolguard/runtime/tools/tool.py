"""A tool's compiled form, what each call uses: :class:`Tool` (validators built once,
declarations checked against the arguments)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..._errors import ToolDefinitionError
from ..forks import strategies as _fork
from ..forks.strategies import ForkStrategy, State
from ..inherit import INHERIT, Inherit
from ..telemetry.spans import call_span_names
from . import schema as _schema
from . import signature as _signature
from .binding import Layout
from .conditions import CONTEXT_NAMES, Postcondition, Precondition
from .json_schema import from_json_schema
from .markers import _DEFAULT_FORK, DryRun, Grounded, Ref
from .places import _compile_produces, _is_path, path_parts

if TYPE_CHECKING:
    from .spec import ToolSpec


class Tool:
    """The compiled tool: validators built once, declarations checked against arguments."""

    def __init__(
        self,
        spec: ToolSpec,
        fn: Callable[..., Any] | None,
        default_name: str | None = None,
        strict: bool = True,
        guard_dry_run: DryRun = None,
    ) -> None:
        name = spec.name or default_name or getattr(fn, "__name__", None)
        if not name or not isinstance(name, str):
            raise ToolDefinitionError("a tool needs a name (pass name=...)")
        self.name: str = name
        self.spec = _call_view(name, spec)
        # The tool's own mode, or None where it is the guard's (read on every call).
        self.own_mode: str | None = spec.mode if isinstance(spec.mode, str) else None
        # Its name as its spans show it, and its call span's name (shortened once, not per call).
        self.span_names = call_span_names(name)
        self.has_function = fn is not None
        self.description = spec.description or (inspect.getdoc(fn) if fn else None) or ""
        self.is_async = fn is not None and _is_async_callable(fn)
        if spec.mode is not INHERIT and spec.mode not in ("block", "log"):
            raise ToolDefinitionError(
                f"tool {name!r}: mode must be 'block' or 'log', or tg.INHERIT (the guard's, "
                f"the default), not {spec.mode!r}"
            )
        if spec.json_schema is not None and spec.args_model is not None:
            raise ToolDefinitionError(f"tool {name!r}: give args_model or json_schema, not both")
        if fn is not None and (spec.produces or spec.postconditions) and _yields(fn):
            # Its call returns a generator the guard cannot read without running it: nothing
            # would be produced (the next call's legal id blocked) nor checked.
            raise ToolDefinitionError(
                f"tool {name!r} is a generator function, whose result produces and "
                "postconditions cannot read: return the values (a list) instead"
            )
        # A `tg.State` parameter: the guard's state (or its fork) goes there, never the model's.
        self.state_param = _state_param(name, fn) if fn is not None else None
        if spec.json_schema is not None:
            self.schema = from_json_schema(name, spec.json_schema, strict=strict)
        elif spec.args_model is not None:
            self.schema = _schema.from_model(name, spec.args_model, strict=strict)
        elif fn is not None:
            hidden = (self.state_param,) if self.state_param else ()
            self.schema = _signature.from_signature(name, fn, strict=strict, hidden=hidden)
        else:
            raise ToolDefinitionError(
                f"tool {name!r}: declared without a function, it needs args_model or json_schema"
            )
        self._layout = (
            Layout(name, _signature.signature_parameters(fn), self.state_param)
            if fn is not None
            else None
        )
        self._posonly = self._layout.posonly if self._layout is not None else ()
        self._varpos = self._layout.varpos if self._layout is not None else None
        # A direct call with only keywords is bound too where one of them may not bind a
        # parameter of its name (a positional-only one's, the *args one's).
        self.binds_keywords: frozenset[str] = (
            self._layout.special if self._layout is not None else frozenset()
        )
        refs = dict(spec.refs)
        grounded = list(spec.grounded)
        for arg, extras in self.schema.metadata.items():
            for marker in extras:
                if isinstance(marker, Ref):
                    refs.setdefault(arg, marker.kind)
                elif (marker is Grounded or isinstance(marker, Grounded)) and arg not in grounded:
                    grounded.append(arg)
        # "arg" is checked on the hot path; "arg.field" / "arg[].field" reach ids nested in
        # an argument (a list of payment objects, say) and are resolved per call.
        self.refs = {a: k for a, k in refs.items() if not _is_path(a)}
        self.ref_paths = [(a, *_split_path(a), k) for a, k in refs.items() if _is_path(a)]
        self.invalidates = dict(spec.invalidates)
        self.grounded = tuple(grounded)
        self.produces = _compile_produces(name, spec.produces)
        self.preconditions = tuple(spec.preconditions)
        self.postconditions = tuple(spec.postconditions)
        self._check_declarations()
        # A method tool runs on a forked instance through its plain function.
        self.is_method = fn is not None and _is_method(fn)
        # A class body's plain function, its self (or cls) not bound: called directly
        # outside its class (`guard.tool(Service.run)(service, 3)`), the first argument is it
        # (the name of that parameter, else None).
        self.owner_param = _owner_param(fn, self._layout)
        self.fork_fn: Callable[..., Any] | None = getattr(fn, "__func__", fn)
        self.dry_run: ForkStrategy | None = self._dry_run(fn, guard_dry_run)
        # The dry run is the call itself (transaction.py): decided once, read on every call.
        self.transactional = self.dry_run is not None and _fork.is_transactional(self.dry_run)
        # The call stages its contract asks for (calls/stages.py), built on first use.
        self.stages: Any = None

    def __repr__(self) -> str:
        parts = [repr(self.name)]
        for label, value in (
            ("refs", self.refs | {a: k for a, _, _, k in self.ref_paths}),
            ("produces", self.spec.produces),
            ("invalidates", self.invalidates),
            ("grounded", list(self.grounded)),
            ("preconditions", [c.id for c in self.preconditions]),
            ("postconditions", [c.id for c in self.postconditions]),
        ):
            if value:
                parts.append(f"{label}={value!r}")
        if self.spec.mode:
            parts.append(f"mode={self.spec.mode!r}")
        if self.dry_run is not None:
            parts.append(f"dry_run={self.dry_run!r}")
        if self.spec.external_effects:
            parts.append("external_effects=True")
        return f"Tool({', '.join(parts)})"

    def _dry_run(self, fn: Callable[..., Any] | None, guard_default: DryRun) -> ForkStrategy | None:
        """The strategy this tool's calls are tried with first, or None."""
        spec, name = self.spec, self.name
        own = _fork.resolve(spec.dry_run, f"tool {name!r}", inherits=True)
        if not isinstance(spec.external_effects, bool):
            raise ToolDefinitionError(f"tool {name!r}: external_effects must be True or False")
        if spec.external_effects and own is not INHERIT and own is not None and own is not False:
            raise ToolDefinitionError(
                f"tool {name!r} asks for a dry run but is declared external_effects=True: what "
                "it does outside the state (an e-mail, a payment) would happen for real on the "
                "fork; drop dry_run, or external_effects if it only changes the state"
            )
        if spec.external_effects or own is False or own is None:
            return None
        guard = _fork.resolve(guard_default, "Guard")
        chosen = guard if isinstance(own, Inherit) else own
        if chosen is None or chosen is False or isinstance(chosen, Inherit):
            return None
        if chosen is True:
            # True means a dry run with the strategy of the level above, where it has one.
            strategy: ForkStrategy = guard if isinstance(guard, ForkStrategy) else _DEFAULT_FORK
        else:
            strategy = chosen
        if fn is None:
            if own is INHERIT:
                return None  # declared by contract alone: its owner runs it, unforked
            raise ToolDefinitionError(
                f"tool {name!r} is declared by contract alone and asks for a dry run: the "
                "guard has no function to run on a fork (register the function instead)"
            )
        if not (_fork.is_in_place(strategy) or self.state_param or self.is_method):
            source = "the guard's dry_run" if own is INHERIT else "its dry_run"
            raise ToolDefinitionError(
                f"tool {name!r}: {source} ({strategy!r}) copies the state, but the function "
                "reaches its state by neither an instance (a method) nor a parameter annotated "
                "tg.State, so the copy could never reach it. Add a parameter "
                "`state: Annotated[T, tg.State]`, guard a method of the state object, use an "
                "in-place strategy (tg.SQLiteSavepointFork), or pass dry_run=False"
            )
        return strategy

    def _check_declarations(self) -> None:
        names = self.schema.name_set
        for label, declared in (
            ("refs", {root: 1 for _, root, _, _ in self.ref_paths} | self.refs),
            ("invalidates", self.invalidates),
            ("grounded", dict.fromkeys(self.grounded)),
        ):
            if names is None:
                continue
            unknown = [a for a in declared if a not in names]
            if unknown:
                raise ToolDefinitionError(
                    f"tool {self.name!r}: {label} names {', '.join(map(repr, unknown))}, "
                    f"which is not an argument (arguments: {', '.join(sorted(names))})"
                )
        conditions = (*self.preconditions, *self.postconditions)
        for condition in conditions:
            asked = set(getattr(condition, "_params", ()))
            clash = sorted(asked & CONTEXT_NAMES & (names or set()))
            if clash:
                raise ToolDefinitionError(
                    f"tool {self.name!r}: condition {condition.id!r} asks for "
                    f"{', '.join(map(repr, clash))}, which is both an argument of the tool and "
                    "a value the guard hands to conditions; ask for `guard_state` (the "
                    "guard's state) or `args` (all arguments by name) instead"
                )
        for condition in conditions:
            if not isinstance(condition, Precondition | Postcondition):
                raise ToolDefinitionError(
                    f"tool {self.name!r}: conditions must be tg.Precondition or "
                    f"tg.Postcondition, not {type(condition).__name__}"
                )
            condition.bind_to(self.name, names)

    # -- calling -----------------------------------------------------------------------------
    def bind(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str] | None]:
        """Positional and keyword arguments as one dict of named arguments, as Python binds
        them, and the keywords held for ``**kwargs`` under other names (binding.py)."""
        if self._layout is None:
            if args:
                raise TypeError(f"tool {self.name!r} takes keyword arguments only")
            return dict(kwargs), None
        return self._layout.bind(args, kwargs)

    def call_parts(
        self, values: Mapping[str, Any], moved: Mapping[str, str] | None = None
    ) -> tuple[list[Any], dict[str, Any]]:
        """Validated named values back into (args, kwargs) for the real function."""
        if self._layout is None:
            return [], dict(values)
        return self._layout.call_parts(values, moved)

    def extract(self, result: Any) -> Iterable[tuple[str, Any]]:
        """(kind, value) pairs the result produces (none from a one-shot iterator, which
        reading would use up)."""
        if is_one_shot(result):
            return
        for kind, find in self.produces:
            for value in find(result) or ():
                yield kind, value


def is_one_shot(result: Any) -> bool:
    """An iterator (sync or async, a generator or ``map``): reading it uses it up."""
    return isinstance(result, Iterator | AsyncIterator)


def _call_view(name: str, spec: ToolSpec) -> ToolSpec:
    """The spec as each call reads it (call.py, dryrun.py, the compiled code): there an
    ``error_result`` of None is the guard's, read per call, and one that reads nothing is
    False. A ``mode`` left to the guard stays INHERIT, which is falsy: ``mode or guard.mode``."""
    detect = spec.error_result
    if not (detect is None or detect is False or detect is INHERIT or callable(detect)):
        raise ToolDefinitionError(
            f"tool {name!r}: error_result must be a callable result -> bool, None or False "
            f"(no result is an error), or tg.INHERIT (the guard's, the default), not {detect!r}"
        )
    view = None if detect is INHERIT else False if detect is None else detect
    return spec if view is detect else dataclasses.replace(spec, error_result=view)


def _state_param(tool: str, fn: Callable[..., Any]) -> str | None:
    """The parameter annotated ``Annotated[T, tg.State]``, if any (at most one)."""
    try:
        params = _signature.signature_parameters(fn)
    except (TypeError, ValueError):
        return None  # the schema reports an unreadable signature
    hints = _signature._resolved_hints(fn)
    found = [
        p
        for p in params
        if any(
            m is State or isinstance(m, State)
            for m in getattr(hints.get(p.name), "__metadata__", ())
        )
    ]
    if not found:
        return None
    if len(found) > 1:
        raise ToolDefinitionError(
            f"tool {tool!r}: one tg.State parameter at most, got {', '.join(p.name for p in found)}"
        )
    param = found[0]
    has_varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    if param.kind is param.POSITIONAL_ONLY or (
        has_varargs and param.kind is not param.KEYWORD_ONLY
    ):
        raise ToolDefinitionError(
            f"tool {tool!r}: the tg.State parameter {param.name!r} is passed by keyword, so it "
            "must be keyword-only when the function takes *args (and never positional-only)"
        )
    return param.name


def _is_method(fn: Callable[..., Any]) -> bool:
    """A bound method, or a function decorated in a class body (its first parameter self)."""
    if inspect.ismethod(fn):
        return True
    if not _signature.defined_in_class_body(fn):
        return False  # a module's function whose first parameter is called self
    params = list(inspect.signature(inspect.unwrap(fn)).parameters)
    return bool(params) and params[0] == "self"


def _owner_param(fn: Callable[..., Any] | None, layout: Layout | None) -> str | None:
    """The self (or cls) parameter of a class body's plain function, which the schema
    leaves out (signature.py), or None."""
    if fn is None or layout is None or hasattr(fn, "__self__"):
        return None
    if not _signature.defined_in_class_body(fn):
        return None
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(params) > len(layout.positional):
        return params[0].name
    return None


def _split_path(spec: str) -> tuple[str, tuple[str, ...]]:
    """`payment_methods[].payment_id` -> ("payment_methods", ("[]", "payment_id"))."""
    try:
        parts = list(path_parts(spec))
    except ValueError as exc:
        raise ToolDefinitionError(f"refs path {spec!r}: {exc}") from None
    if not parts or parts[0] == "[]":
        raise ToolDefinitionError(f"refs path {spec!r} must start with an argument name")
    return parts[0], tuple(parts[1:])


def _yields(fn: Callable[..., Any]) -> bool:
    target = inspect.unwrap(fn)
    return inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target)


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    target = inspect.unwrap(fn)
    if inspect.iscoroutinefunction(target):
        return True
    # A callable object whose __call__ is async (a class-based tool).
    call = inspect.getattr_static(type(target), "__call__", None)
    return not inspect.isfunction(target) and inspect.iscoroutinefunction(call)
