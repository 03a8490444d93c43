"""A direct call's positional and keyword arguments bound as Python binds them, into the
named values the checks read, and those values back into the function's ``(args, kwargs)``.

One dict of named values cannot hold a keyword that Python puts into ``**kwargs`` although a
parameter has its name: a positional-only parameter's name (``f(1, a=2)`` for
``def f(a, /, **kw)``) or the ``*args`` parameter's. Such a keyword is held under a name no
parameter can have (``**a``), validated as a ``**kwargs`` value, and named back when the
function is called (``moved``: held name -> keyword)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any


class Layout:
    """What binding a call needs of a signature, read once when the tool is declared."""

    __slots__ = ("named", "positional", "posonly", "special", "tool", "varkw", "varpos")

    def __init__(self, tool: str, params: list[inspect.Parameter], state: str | None) -> None:
        self.tool = tool
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        # Where a positional argument goes (the tg.State parameter too: Python binds it there).
        self.positional = tuple(p.name for p in positional)
        # The positional parameters the function is called with (the state is passed by
        # keyword: tool.py makes it keyword-only when there is an *args).
        self.named = tuple(p.name for p in positional if p.name != state)
        self.posonly = tuple(p.name for p in params if p.kind is p.POSITIONAL_ONLY)
        self.varpos = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
        self.varkw = any(p.kind is p.VAR_KEYWORD for p in params)
        # Names a keyword argument never binds a parameter by.
        self.special = frozenset(self.posonly) | ({self.varpos} if self.varpos else set())

    def bind(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str] | None]:
        """The named values and what was moved (module docstring). A TypeError where
        Python raises one for the shape of the call (a missing or unknown argument is the
        schema check's)."""
        positional = self.positional
        bound = dict(zip(positional, args, strict=False))
        if len(args) > len(positional):
            if self.varpos is None:
                raise TypeError(
                    f"{self.tool}() takes {len(positional)} positional arguments "
                    f"but {len(args)} were given"
                )
            bound[self.varpos] = tuple(args[len(positional) :])
        moved: dict[str, str] | None = None
        special = self.special
        for key, value in kwargs.items():
            if key in special:
                if not self.varkw:
                    if key == self.varpos:
                        raise TypeError(f"{self.tool}() got an unexpected keyword argument {key!r}")
                    raise TypeError(
                        f"{self.tool}() got some positional-only arguments passed as keyword "
                        f"arguments: {key!r}"
                    )
                held = f"**{key}"  # no parameter's name starts with *
                while held in kwargs or held in bound:
                    held = f"*{held}"
                if moved is None:
                    moved = {}
                moved[held] = key
                bound[held] = value
            elif key in bound:
                raise TypeError(f"{self.tool}() got multiple values for argument {key!r}")
            else:
                bound[key] = value
        return bound, moved

    def call_parts(
        self, values: Mapping[str, Any], moved: Mapping[str, str] | None = None
    ) -> tuple[list[Any], dict[str, Any]]:
        """Validated named values back into (args, kwargs) for the real function."""
        kwargs = dict(values)
        if not self.posonly and self.varpos is None:
            return [], kwargs
        rest = kwargs.pop(self.varpos, ()) if self.varpos is not None else ()
        # Extra positional values can only follow every named positional parameter, so with
        # any of them those go positionally too (f(b=2, *rest) would bind b twice).
        named = self.named if rest else self.posonly
        args = []
        for name in named:
            if name not in kwargs:
                break
            args.append(kwargs.pop(name))
        args.extend(rest)
        if moved:  # in place, so that **kwargs keeps the call's order
            kwargs = {moved.get(key, key): value for key, value in kwargs.items()}
        return args, kwargs
