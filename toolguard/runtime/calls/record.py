"""The record stage of a call the environment accepted: what its result ``produces`` is
bound in the trajectory, what it ``invalidates`` goes stale, and (for the information check)
the trajectory sees its result.

Each ``produces`` place is turned into a finder once, when the tool is declared. A key name
(``produces={"id": "contact"}``) gets the fast finder below: a flat record or a list of flat
records (most results) is looked up without walking it; anything else is walked by
``find_key_into``, which finds exactly what ``_find_key`` finds.

A one-shot iterator (a generator, ``map``, ``iter(list)``, an async generator) is read by
no finder: reading it would use it up, and the caller gets it to read. Its tool is named in
one warning, and the kinds it should have produced are marked unread in the trajectory, so
that a later call referring to one of its ids is told why it is unknown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

from ..tools.places import _LEAVES, _find_key, find_key_into
from ..tools.tool import Tool, is_one_shot
from ..trajectories.nesting import shown

if TYPE_CHECKING:
    from ..trajectories.trajectory import Trajectory
    from .call import _Call

logger = logging.getLogger("toolguard")

_DICTS = frozenset({dict})
# Results no iterator check is needed for (the shapes most results have), by exact type.
_NOT_ONE_SHOT = _LEAVES | {dict, list, tuple, set, frozenset}
Finder = Callable[[Any, list[Any]], None]  # (result, out): the values found appended to out
Record = Callable[["_Call", "Trajectory", Any, bool], None]


def record_stage(tool: Tool) -> Record | None:
    """What an accepted call of ``tool`` changes in its trajectory, or None when its
    contract binds and invalidates nothing (observing the result is then the caller's)."""
    name = tool.name
    produces = tuple((kind, finder(find)) for kind, find in tool.produces)
    invalidates = tuple(tool.invalidates.items())
    if not produces and not invalidates:
        return None
    kinds = tuple(dict.fromkeys(kind for kind, _ in produces))
    warned: list[bool] = []  # once per tool (this stage is built once per tool)

    def record(call: _Call, traj: Trajectory, result: Any, observe: bool) -> None:
        step = call.step
        try:
            if produces and type(result) not in _NOT_ONE_SHOT and is_one_shot(result):
                _unread(name, traj, kinds, warned)
                found_in: tuple[tuple[str, Finder], ...] = ()
            else:
                found_in = produces
            for kind, find in found_in:
                found: list[Any] = []
                try:
                    find(result, found)
                finally:  # what was found before a finder failed is bound all the same
                    if found:
                        traj._bindings.produce_all(kind, found, name, step)
            for arg, kind in invalidates:
                value = call.arguments.get(arg)
                for item in value if isinstance(value, list | tuple) else (value,):
                    traj._bindings.invalidate(kind, item, f"{name} at step {step}")
            if observe:
                traj.observe(result)
        except Exception:
            # A `produces` callable with a bug must not turn a good call into a crash.
            logger.exception("toolguard: reading the result of %s failed", shown(name))

    return record


def _unread(name: str, traj: Trajectory, kinds: tuple[str, ...], warned: list[bool]) -> None:
    """``name`` returned a one-shot iterator: nothing produced, and said so."""
    unread = traj._bindings.unread
    for kind in kinds:
        unread[kind] = name
    if not warned:
        warned.append(True)
        logger.warning(
            "toolguard: tool %s declares produces but returned a one-shot iterator, which "
            "the guard cannot read without using it up: nothing it returns is produced, so "
            "a later call referring to one of its ids is blocked. Return the values as a "
            "list (or tuple) instead (logged once per tool)",
            shown(name),
        )


def observe_only(call: _Call, traj: Trajectory, result: Any, observe: bool) -> None:
    """The record stage of a tool that binds nothing, while the guard observes outputs."""
    try:
        traj.observe(result)
    except Exception:
        logger.exception("toolguard: reading the result of %s failed", shown(call.name))


def finder(find: Callable[[Any], Iterable[Any]]) -> Finder:
    """The appending form of a ``produces`` place's finder (tool.py compiles the places)."""
    key = _key_place(find)
    if key is not None:
        return _key_finder(key)

    def generic(result: Any, out: list[Any]) -> None:
        out.extend(find(result) or ())  # extend keeps what came before an exception

    return generic


def _key_place(find: Callable[..., Any]) -> str | None:
    """The key of a ``produces`` key-name place (a partial of _find_key), else None."""
    if getattr(find, "func", None) is _find_key and not getattr(find, "args", True):
        keywords = getattr(find, "keywords", {})
        if set(keywords) == {"key", "depth"} and keywords["depth"] == 0:
            key = keywords["key"]
            return key if isinstance(key, str) else None
    return None


def _key_finder(key: str) -> Finder:
    """``out.extend(_find_key(result, key, 0))``, with the two shapes most results have (a
    flat record, a list of flat records) looked up directly."""

    def find(result: Any, out: list[Any]) -> None:
        kind = type(result)
        if kind is dict:
            # A flat dict (scalar values) holds the key at most once, as a scalar. (A key
            # equal to the name under another hash, which breaks Python's hash contract, is
            # not looked at.)
            if _LEAVES.issuperset(map(type, result.values())):
                if key in result:
                    out.append(result[key])
                return
            find_key_into(result, key, out)  # a record holding containers: walked whole
        elif kind is list:
            # A list of records (a search's answer): a flat record is looked up as above, a
            # record holding a container is walked whole.
            leaves = _LEAVES.issuperset
            if _DICTS.issuperset(map(type, result)) and leaves(
                map(type, chain.from_iterable(map(dict.values, result)))
            ):
                # Flat records only (a search's answer, most lists): looked up without a
                # Python step per record. A record without the key, or holding None, binds
                # nothing, as _find_key finds nothing there.
                values = list(map(dict.get, result, repeat(key)))
                if None in values:
                    values = [value for value in values if value is not None]
                out.extend(values)
                return
            for item in result:
                if type(item) is dict:
                    if leaves(map(type, item.values())):
                        if key in item:
                            out.append(item[key])
                    else:
                        find_key_into(item, key, out, 1)
                elif type(item) not in _LEAVES:
                    find_key_into(item, key, out, 1)
        else:
            find_key_into(result, key, out)

    return find
