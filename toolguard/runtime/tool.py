"""A tool's declaration (what the user writes) and its compiled form (what each call uses)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from pydantic import BaseModel

from .._errors import ToolDefinitionError
from . import fork as _fork
from . import schema as _schema
from .conditions import CONTEXT_NAMES, Postcondition, Precondition
from .fork import DeepCopyFork, ForkStrategy, State
from .inherit import INHERIT, Inherit

Mode = Literal["block", "log"]
WHOLE_RESULT = "$"  # `produces={"$": "session"}`: the return value itself is the value

# Where a produced value is found in a result: a key name (anywhere in it), a path from its
# root ("items[].id"), "$" for the result itself, or a callable result -> iterable of values.
ResultPlace = str | Callable[[Any], Iterable[Any]]
# One meaning per value, on a guard and on a tool alike: a predicate result -> bool (true:
# the environment rejected the call); None or False, no result is read as an error.
ErrorResult = Callable[[Any], bool] | Literal[False] | None
# None or False: no dry run; True: one, with the strategy of the level above where it has
# one, else a deep copy; a strategy: that one. See fork.resolve.
DryRun = ForkStrategy | bool | None
_DEFAULT_FORK = DeepCopyFork()  # what dry_run=True means where no strategy is given


@dataclass(frozen=True)
class Ref:
    """``Annotated[str, tg.Ref("contact_id")]``: the argument must refer to a value of that
    kind produced earlier in the trajectory (the same as ``refs={"arg": "contact_id"}``)."""

    kind: str


class Grounded:
    """``Annotated[str, tg.Grounded]``: the argument's value must appear in what the
    trajectory has seen (the same as ``grounded=["arg"]``)."""


@dataclass
class ToolSpec:
    """Everything the guard knows about one tool besides its function.

    Every mapping reads the same way round: the place in this call on the left (an argument
    name or path, or a place in the result), the kind of value on the right.

    - ``refs``: argument -> kind of bound value it must refer to (``dependency``);
      ``"arg.field"`` and ``"arg[].field"`` reach ids nested inside an argument.
    - ``produces``: place in the result -> kind: a key name (found wherever it occurs:
      nested dicts, lists, pydantic models, dataclasses), a path from the result's root
      (``"items[].id"``), ``"$"`` for the result itself, or a callable
      ``result -> iterable of values``.
    - ``invalidates``: argument -> kind; once the call ran, that value is stale.
    - ``preconditions`` / ``postconditions``: see :class:`Precondition`.
    - ``grounded``: arguments whose value must appear in what the trajectory has seen.
    - ``error_result``: ``result -> bool``, true when the environment rejected the call;
      ``None`` or ``False`` never reads a result as an error (as on the guard).
    - ``args_model`` or ``json_schema``: the schema, instead of the function's type hints.
    - ``mode``: ``"block"`` or ``"log"`` for this tool, overriding the guard's.
    - ``strict``: ``True`` judges arguments by the JSON Schema's meaning (no ``"42"`` for an
      integer, no unknown argument), ``False`` lets pydantic coerce.
    - ``dry_run``: try each call on a fork of the state before it runs (docs/fork-and-plans.md):
      ``None`` or ``False`` never, ``True`` with the guard's strategy or a deep copy where it
      has none, or a fork strategy (``tg.DeepCopyFork()``, ``tg.SQLiteSavepointFork``,
      ``tg.CallbackFork``) whatever the guard says.

    ``error_result``, ``mode``, ``strict`` and ``dry_run`` default to :data:`tg.INHERIT`: the
    guard's (its ``dry_run`` read when the tool is declared, the others per call).
    - ``external_effects``: the tool acts outside the state (sends e-mail, pays): it is never
      tried on a fork; asking for both is a :class:`ToolDefinitionError`.
    """

    name: str | None = None
    description: str | None = None
    args_model: type[BaseModel] | None = None
    json_schema: Mapping[str, Any] | None = None
    refs: Mapping[str, str] = field(default_factory=dict)
    produces: Mapping[ResultPlace, str] = field(default_factory=dict)
    invalidates: Mapping[str, str] = field(default_factory=dict)
    preconditions: Sequence[Precondition] = ()
    postconditions: Sequence[Postcondition] = ()
    grounded: Sequence[str] = ()
    error_result: ErrorResult | Inherit = INHERIT
    mode: Mode | Inherit = INHERIT
    strict: bool | Inherit = INHERIT
    dry_run: DryRun | Inherit = INHERIT
    external_effects: bool = False
    # Compiled schemas, keyed by function: a proxy over a fresh object of the same class
    # (one per benchmark task, say) reuses them instead of rebuilding validators. Held
    # weakly: the guards using a compiled tool keep it alive, and a spec shared by many
    # short-lived guards (each with its own fork strategy, its own closure) would otherwise
    # keep one tool per guard for as long as the spec lives.
    _compiled: weakref.WeakValueDictionary[Any, Tool] = field(
        default_factory=weakref.WeakValueDictionary, init=False, repr=False
    )

    # Weak references do not pickle or copy: a copy starts with a cache of its own.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_compiled"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._compiled = weakref.WeakValueDictionary()

    def compile(
        self,
        fn: Callable[..., Any] | None,
        default_name: str | None = None,
        strict: bool = True,
        dry_run: DryRun = None,
    ) -> Tool:
        """The compiled tool; ``strict`` and ``dry_run`` are the guard's (see :class:`Guard`)."""
        if self.strict is not INHERIT:
            if not isinstance(self.strict, bool):
                name = self.name or default_name or getattr(fn, "__name__", "?")
                raise ToolDefinitionError(
                    f"tool {name!r}: strict must be True or False, or tg.INHERIT (the "
                    f"guard's, the default), not {self.strict!r}"
                )
            strict = self.strict
        # The guard's strategy by identity: the compiled tool holds it, so the id stays its.
        key = (getattr(fn, "__func__", fn), default_name, strict, id(dry_run))
        tool = self._compiled.get(key)
        if tool is None:
            tool = Tool(self, fn, default_name, strict, dry_run)
            self._compiled[key] = tool
        return tool


class ToolOptions(TypedDict, total=False):
    """The options of ``@guard.tool(...)``, ``guard.register`` and ``guard.declare``: the
    fields of :class:`ToolSpec` but ``name`` (a parameter of its own there), meaning what
    they mean there; an option left out takes the field's default. Written for type
    checkers (``**options: Unpack[tg.ToolOptions]``): a misspelt option or a value of the
    wrong type is an error before anything runs. A test keeps it equal to the fields."""

    description: str | None
    args_model: type[BaseModel] | None
    json_schema: Mapping[str, Any] | None
    refs: Mapping[str, str]
    produces: Mapping[ResultPlace, str]
    invalidates: Mapping[str, str]
    preconditions: Sequence[Precondition]
    postconditions: Sequence[Postcondition]
    grounded: Sequence[str]
    error_result: ErrorResult | Inherit
    mode: Mode | Inherit
    strict: bool | Inherit
    dry_run: DryRun | Inherit
    external_effects: bool


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
        # A `tg.State` parameter: the guard's state (or its fork) goes there, never the model's.
        self.state_param = _state_param(name, fn) if fn is not None else None
        if spec.json_schema is not None:
            self.schema = _schema.from_json_schema(name, spec.json_schema, strict=strict)
        elif spec.args_model is not None:
            self.schema = _schema.from_model(name, spec.args_model, strict=strict)
        elif fn is not None:
            hidden = (self.state_param,) if self.state_param else ()
            self.schema = _schema.from_signature(name, fn, strict=strict, hidden=hidden)
        else:
            raise ToolDefinitionError(
                f"tool {name!r}: declared without a function, it needs args_model or json_schema"
            )
        self._params = _call_layout(fn, self.state_param) if fn is not None else None
        self._posonly = _positional_only(fn) if fn is not None else ()
        self._varpos = self._params[1] if self._params else None
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
    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Positional and keyword arguments as one dict of named arguments."""
        if not args:
            return dict(kwargs)
        layout = self._params
        if layout is None:
            raise TypeError(f"tool {self.name!r} takes keyword arguments only")
        named, var_positional = layout
        bound = dict(zip(named, args, strict=False))
        if len(args) > len(named):
            if var_positional is None:
                raise TypeError(
                    f"{self.name}() takes {len(named)} positional arguments "
                    f"but {len(args)} were given"
                )
            bound[var_positional] = tuple(args[len(named) :])
        for key, value in kwargs.items():
            if key in bound:
                raise TypeError(f"{self.name}() got multiple values for argument {key!r}")
            bound[key] = value
        return bound

    def call_parts(self, values: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Validated named values back into (args, kwargs) for the real function."""
        if not self._posonly and self._varpos is None:
            return [], dict(values)
        kwargs = dict(values)
        rest = kwargs.pop(self._varpos, ()) if self._varpos is not None else ()
        # Extra positional values can only follow every named positional parameter, so with
        # any of them those go positionally too (f(b=2, *rest) would bind b twice).
        named = self._params[0] if rest and self._params else self._posonly
        args = []
        for name in named:
            if name not in kwargs:
                break
            args.append(kwargs.pop(name))
        args.extend(rest)
        return args, kwargs

    def extract(self, result: Any) -> Iterable[tuple[str, Any]]:
        """(kind, value) pairs the result produces."""
        for kind, find in self.produces:
            for value in find(result) or ():
                yield kind, value


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


def _call_layout(
    fn: Callable[..., Any], state_param: str | None = None
) -> tuple[tuple[str, ...], str | None]:
    params = [p for p in _schema.signature_parameters(fn) if p.name != state_param]
    named = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    var_positional = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    return named, var_positional


def _state_param(tool: str, fn: Callable[..., Any]) -> str | None:
    """The parameter annotated ``Annotated[T, tg.State]``, if any (at most one)."""
    try:
        params = _schema.signature_parameters(fn)
    except (TypeError, ValueError):
        return None  # the schema reports an unreadable signature
    hints = _schema._resolved_hints(fn)
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
    target = inspect.unwrap(fn)
    if not inspect.isfunction(target):
        return False
    params = list(inspect.signature(target).parameters)
    return bool(params) and params[0] == "self"


def _is_path(spec: str) -> bool:
    return "." in spec or "[]" in spec


def _split_path(spec: str) -> tuple[str, tuple[str, ...]]:
    """`payment_methods[].payment_id` -> ("payment_methods", ("[]", "payment_id"))."""
    parts = [p for p in spec.replace("[]", ".[]").split(".") if p]
    if not parts or parts[0] == "[]":
        raise ToolDefinitionError(f"refs path {spec!r} must start with an argument name")
    return parts[0], tuple(parts[1:])


def resolve_path(value: Any, parts: tuple[str, ...]) -> list[Any]:
    """The values a path reaches inside one argument value (missing steps reach nothing)."""
    current = [value]
    for part in parts:
        step: list[Any] = []
        for item in current:
            if part == "[]":
                if isinstance(item, list | tuple):
                    step.extend(item)
            elif isinstance(item, Mapping):
                if part in item:
                    step.append(item[part])
            elif hasattr(item, part):
                step.append(getattr(item, part))
        current = step
    return [v for v in current if v is not None]


def _positional_only(fn: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(p.name for p in _schema.signature_parameters(fn) if p.kind is p.POSITIONAL_ONLY)


def _find_key(value: Any, key: str, depth: int) -> Iterable[Any]:
    if depth > 20:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if k == key and not isinstance(v, Mapping | list | tuple):
                yield v
            elif k == key and isinstance(v, list | tuple):
                yield from (x for x in v if not isinstance(x, Mapping | list | tuple))
            else:
                yield from _find_key(v, key, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _find_key(v, key, depth + 1)
    elif hasattr(value, "__pydantic_fields__") or hasattr(value, "__dataclass_fields__"):
        fields = getattr(value, "__pydantic_fields__", None) or value.__dataclass_fields__
        yield from _find_key({n: getattr(value, n, None) for n in fields}, key, depth + 1)


_LEAVES = frozenset({str, int, float, bool, type(None), bytes})  # _find_key finds nothing in
_KEY_CONTAINERS = (Mapping, list, tuple)


def find_key_into(value: Any, key: str, out: list[Any], depth: int = 0) -> None:
    """``out.extend(_find_key(value, key, depth))`` without a generator per container:
    exact dicts, lists and tuples and leaves of built-in types take direct branches; anything
    else goes through ``_find_key`` itself. Values found before an exception stay in ``out``,
    as they would have been consumed from the generator."""
    if depth > 20:
        return
    kind = type(value)
    if kind is dict:
        depth += 1
        for k, v in value.items():
            if type(k) is not str:
                out.extend(_find_key({k: v}, key, depth - 1))
            elif k == key:
                if type(v) in _LEAVES or not isinstance(v, _KEY_CONTAINERS):
                    out.append(v)
                elif isinstance(v, list | tuple):
                    out.extend(x for x in v if not isinstance(x, _KEY_CONTAINERS))
                else:
                    find_key_into(v, key, out, depth)
            elif type(v) not in _LEAVES:
                find_key_into(v, key, out, depth)
    elif kind is list or kind is tuple or kind is set or kind is frozenset:
        depth += 1
        for v in value:
            if type(v) not in _LEAVES:
                find_key_into(v, key, out, depth)
    elif kind not in _LEAVES:
        out.extend(_find_key(value, key, depth))


def _compile_produces(
    tool: str, produces: Mapping[ResultPlace, str]
) -> tuple[tuple[str, Callable[[Any], Iterable[Any]]], ...]:
    """Each (place -> kind) entry as (kind, finder) once, so a call does no parsing."""
    if not isinstance(produces, Mapping):
        raise ToolDefinitionError(f"tool {tool!r}: produces must be a mapping place -> kind")
    out: list[tuple[str, Callable[[Any], Iterable[Any]]]] = []
    for place, kind in produces.items():
        if not isinstance(kind, str) or not kind:
            raise ToolDefinitionError(
                f"tool {tool!r}: produces[{place!r}] must name a kind (a string), not "
                f"{kind!r}; the place in the result is the key, the kind the value"
            )
        if callable(place):
            out.append((kind, place))
        elif not isinstance(place, str) or not place:
            raise ToolDefinitionError(
                f"tool {tool!r}: a produces key must be a result place (a key name, a path "
                f"such as 'items[].id', or '$') or a callable, not {place!r}"
            )
        elif place == WHOLE_RESULT:
            out.append((kind, _whole))
        elif _is_path(place):
            parts = _result_path(place)
            out.append((kind, functools.partial(resolve_path, parts=parts)))
        else:
            out.append((kind, functools.partial(_find_key, key=place, depth=0)))
    return tuple(out)


def _whole(result: Any) -> tuple[Any, ...]:
    return (result,)


def _result_path(place: str) -> tuple[str, ...]:
    text = place[2:] if place.startswith("$.") else place
    return tuple(p for p in text.replace("[]", ".[]").split(".") if p)


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    target = inspect.unwrap(fn)
    if inspect.iscoroutinefunction(target):
        return True
    # A callable object whose __call__ is async (a class-based tool).
    call = inspect.getattr_static(type(target), "__call__", None)
    return not inspect.isfunction(target) and inspect.iscoroutinefunction(call)
