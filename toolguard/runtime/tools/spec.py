"""A tool's declaration, what the user writes: :class:`ToolSpec` and its options."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from pydantic import BaseModel

from ..._errors import ToolDefinitionError
from ..inherit import INHERIT, Inherit
from ..tools.conditions import Postcondition, Precondition
from .markers import DryRun, ErrorResult, Mode, ResultPlace
from .tool import Tool


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
        # The guard's strategy and the function by identity: the compiled tool holds both, so
        # each id stays theirs. (By equality, a callable object that is unhashable, such as a
        # dataclass instance, could not be registered, and two equal ones shared one tool.)
        key = (id(getattr(fn, "__func__", fn)), default_name, strict, id(dry_run))
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


_SPEC_FIELDS = frozenset(ToolSpec.__dataclass_fields__) - {"_compiled"}


def spec_from(spec: ToolSpec | None, options: Mapping[str, Any]) -> ToolSpec:
    """``spec``, or a ToolSpec of ``options`` (a declaration's keyword options), not both.
    The type checker sees the options' names; a caller passing a dict is told here."""
    unknown = set(options) - _SPEC_FIELDS
    if unknown:
        name = options.get("name")
        where = f"tool {name!r}: " if isinstance(name, str) else ""
        raise ToolDefinitionError(
            f"{where}unknown tool option(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(_SPEC_FIELDS))}"
        )
    if spec is not None and options:
        raise ToolDefinitionError("pass either a ToolSpec or options, not both")
    return spec if spec is not None else ToolSpec(**options)
