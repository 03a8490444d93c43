"""Declared conditions: predicates checked before (pre) and after (post) a call."""

from __future__ import annotations

import inspect
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._errors import ToolDefinitionError

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = 6
_short.maxdict = 6


def shorten(value: Any) -> str:
    """A bounded repr: violation messages show offending values without flooding a prompt."""
    try:
        return _short.repr(value)
    except Exception:  # a hostile __repr__ must not break the message
        return f"<{type(value).__name__}>"


# Names a predicate may ask for besides the tool's own arguments. A predicate that asks for
# one the tool also has as an argument is a definition error (which would it get?);
# `guard_state` is the guard's state under a name no tool argument takes in practice.
CONTEXT_NAMES = frozenset({"state", "guard_state", "instance", "args", "result"})


@dataclass(frozen=True)
class _Condition:
    id: str
    predicate: Callable[..., Any]
    message: str = ""
    _params: tuple[str, ...] = field(default=(), init=False, repr=False)
    _takes_kwargs: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.id or not isinstance(self.id, str):
            raise ToolDefinitionError(f"a condition needs a non-empty string id, got {self.id!r}")
        if not callable(self.predicate):
            raise ToolDefinitionError(f"condition {self.id!r}: predicate is not callable")
        sig = inspect.signature(self.predicate)
        params = tuple(
            p.name
            for p in sig.parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        )
        takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        # Frozen dataclass: the signature is read once, here, not on every call.
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "_takes_kwargs", takes_kwargs)

    def bind_to(self, tool: str, arg_names: frozenset[str] | None) -> None:
        """Fail at wrap time when the predicate asks for an argument the tool lacks."""
        if arg_names is None:
            return
        unknown = [p for p in self._params if p not in CONTEXT_NAMES and p not in arg_names]
        if unknown:
            raise ToolDefinitionError(
                f"tool {tool!r}: condition {self.id!r} asks for {', '.join(unknown)}, "
                f"which is neither an argument of the tool ({', '.join(sorted(arg_names))}) "
                f"nor one of {', '.join(sorted(CONTEXT_NAMES))}"
            )

    def evaluate(
        self, context: Mapping[str, Any], args: Mapping[str, Any]
    ) -> tuple[bool, dict[str, Any]]:
        """Return (holds, the values it was given) - the values go into the message."""
        given: dict[str, Any] = {}
        for name in self._params:
            if name in args and name not in CONTEXT_NAMES:
                given[name] = args[name]
            elif name == "args":
                given[name] = dict(args)
            elif name in context:
                given[name] = context[name]
            elif name == "guard_state":
                given[name] = context.get("state")
            else:
                given[name] = args.get(name)
        if self._takes_kwargs:
            extra = {k: v for k, v in args.items() if k not in given}
            return bool(self.predicate(**given, **extra)), given
        return bool(self.predicate(**given)), given

    def describe(self, given: Mapping[str, Any]) -> str:
        shown = ", ".join(
            f"{k}={shorten(v)}"
            for k, v in given.items()
            if k not in ("state", "guard_state", "instance")
        )
        text = self.message or f"condition {self.id!r} does not hold"
        return f"{text} ({shown})" if shown else text


@dataclass(frozen=True)
class Precondition(_Condition):
    """A predicate over the readable state and the arguments, checked before the call.

    The predicate takes, by parameter name, any of the tool's arguments and ``state``
    (the guard's state), ``instance`` (the object of a guarded method) or ``args``.
    Its check id is ``precondition.<id>``.
    """


@dataclass(frozen=True)
class Postcondition(_Condition):
    """A predicate checked after the call ran; may also take ``result``.
    A false one makes the call a ``state_consistency`` failure with check id
    ``postcondition.<id>``."""
