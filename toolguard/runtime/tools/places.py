"""Places in values: where ``produces`` finds values in a result, and where a ``refs`` path
(``arg[].field``) reaches inside an argument. Compiled once per tool, walked per call."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..._errors import ToolDefinitionError
from .markers import WHOLE_RESULT, ResultPlace


def _is_path(spec: str) -> bool:
    return "." in spec or "[" in spec or "]" in spec  # a bracket is read as a path, and checked


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
    elif isinstance(value, tuple) and isinstance(
        names := getattr(type(value), "_fields", None), tuple
    ):
        # A named tuple is a record: its values are found by their field names.
        yield from _find_key(dict(zip(names, value, strict=False)), key, depth)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _find_key(v, key, depth + 1)
    elif isinstance(value, type):
        return  # a class, not a record: its field names are no values
    elif hasattr(value, "__pydantic_fields__"):
        yield from _find_key(model_values(value), key, depth + 1)
    elif hasattr(value, "__dataclass_fields__"):
        fields = value.__dataclass_fields__
        yield from _find_key({n: getattr(value, n, None) for n in fields}, key, depth + 1)
    elif isinstance(getattr(type(value), "__attrs_attrs__", None), tuple):
        # An attrs class (its instances may have slots, no __dict__): by its fields' names.
        attributes = [a.name for a in type(value).__attrs_attrs__]
        yield from _find_key({n: getattr(value, n, None) for n in attributes}, key, depth + 1)


def model_values(model: Any) -> dict[str, Any]:
    """A pydantic model's values as its JSON shows them: fields, computed fields and the
    extra values a model with ``extra="allow"`` keeps (a response model of an API). Where
    ``produces`` looks, and what the trajectory sees of it (``trajectories/leaves.py``)."""
    values = {n: getattr(model, n, None) for n in model.__pydantic_fields__}
    for name in getattr(model, "__pydantic_computed_fields__", None) or ():
        try:
            values[name] = getattr(model, name)
        except Exception:  # the model's own property failed: it has no such value to show
            continue
    extra = getattr(model, "__pydantic_extra__", None)
    if isinstance(extra, dict):
        values.update({k: v for k, v in extra.items() if k not in values})
    return values


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
            try:
                parts = _result_path(place)
            except ValueError as exc:
                raise ToolDefinitionError(
                    f"tool {tool!r}: produces place {place!r}: {exc}"
                ) from None
            out.append((kind, functools.partial(resolve_path, parts=parts)))
        else:
            out.append((kind, functools.partial(_find_key, key=place, depth=0)))
    return tuple(out)


def _whole(result: Any) -> tuple[Any, ...]:
    return (result,)


def _result_path(place: str) -> tuple[str, ...]:
    if place.startswith("$.") or place.startswith("$["):  # JSONPath's root, as in "$.items"
        place = place[1:]
    return path_parts(place)


def path_parts(path: str) -> tuple[str, ...]:
    """``items[].id`` -> ``("items", "[]", "id")``: key names, and ``[]`` for every item of a
    list. A ValueError for a step no value could ever be found at (an index ``[0]``, a
    wildcard ``[*]`` or ``*``): the rule would check nothing, in silence."""
    parts = tuple(p for p in path.replace("[]", ".[]").split(".") if p)
    for part in parts:
        if part == "*" or (part != "[]" and ("[" in part or "]" in part)):
            raise ValueError(
                f"{part!r} is no step of a path: write key names and [] for every item of a "
                "list, as 'items[].id' (an index or a wildcard is not supported)"
            )
    return parts
