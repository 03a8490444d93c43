"""The tool's own return value, before LangChain turns it into message text.

A ``ToolMessage`` holds ``json.dumps(value)`` when that works and ``str(value)`` when it does
not (pydantic models, dataclasses, a ``datetime`` inside a dict), and ``produces`` cannot be
read back from ``str(value)``. So the framework runs a copy of the tool whose ``_run`` /
``_arun`` keep what they return in the call's cell: the value the other adapters read. The
cell also holds the call's span (``_call_span.py``), bound and made current while they run,
and notes whether they ran at all: LangChain validates the arguments before ``_run``, and a
call it refused there never executed (``_calls._refused``).
A tool's copy is made on its first call and lives as long as the tool (``RunningCopies``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
import typing
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ._call_span import CallSpan
from ._framework import BaseTool

logger = logging.getLogger("toolguard")


class Cell(list[Any]):
    """The running call's raw return values (one per attempt) and its span; whether the
    tool's ``_run`` / ``_arun`` was entered (``ran``), and the exception LangChain's argument
    parsing (``_to_args_and_kwargs``, before ``_run``) refused the call with (``refused``):
    refused and never run, the call did not execute, whatever message the framework made."""

    __slots__ = ("ran", "refused", "span")

    def __init__(self, span: CallSpan | None) -> None:
        super().__init__()
        self.span = span
        self.ran = False
        self.refused: BaseException | None = None


# The running call's cell: the tool copy appends its raw return value. A list, not a value:
# LangChain runs ``_run`` in a copied context (and ``_arun`` may run it in an executor), where
# setting a variable would not reach the caller, but appending to the same list does.
_cell: ContextVar[Cell | None] = ContextVar("toolguard_langchain_raw", default=None)


def capture(span: CallSpan | None = None) -> tuple[Cell, Any]:
    """A fresh cell for one call, current until :func:`release`."""
    cell = Cell(span)
    return cell, _cell.set(cell)


def release(token: Any) -> None:
    _cell.reset(token)


def capturing_copy(tool: BaseTool, update: dict[str, Any]) -> BaseTool | None:
    """A copy of ``tool`` (with ``update`` applied) that keeps its raw results, or None when
    the tool cannot be copied (then the message text is read, as before).

    The copy is a shell the framework runs (callbacks, message formatting); its ``_run`` /
    ``_arun`` call the original tool's, so a tool that keeps state on itself (a private
    attribute it reassigns) keeps it on the object the user holds. Only a copy that runs the
    plain function of a ``@guard.tool`` (``update``) runs its own methods."""
    try:
        copy = tool.model_copy(update=update)
    except Exception:  # a tool type that refuses copies: no raw value
        logger.debug("toolguard: cannot copy tool %r; reading its message text", tool.name)
        return None
    owner = copy if update else tool
    try:
        for attr in ("_run", "_arun"):
            # An instance attribute shadows the class's method on the copy only. The wrapper
            # keeps the method's signature: LangChain reads it to pass ``config`` and
            # ``run_manager``.
            object.__setattr__(copy, attr, _keeping(getattr(owner, attr), attr == "_arun"))
        parse = _parsing(_weak(owner._to_args_and_kwargs))
        object.__setattr__(copy, "_to_args_and_kwargs", parse)
    except Exception:  # attributes refused: the framework runs the tool itself
        logger.debug("toolguard: cannot wrap tool %r; reading its message text", tool.name)
        return copy if update else None
    return copy


def _keeping(method: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    return _described(_keeper(_weak(method), method, is_async), method)


def _weak(method: Callable[..., Any]) -> Callable[[], Callable[..., Any] | None]:
    """``method`` held weakly where it is bound: the copy runs the original tool's, and
    must not keep it alive (copies live as long as their tools, :class:`RunningCopies`).
    The original outlives every run of its copy: the tool node holds it."""
    try:
        return weakref.WeakMethod(method)
    except TypeError:  # a plain function: it holds no tool
        return lambda: method


def _described(wrapper: Callable[..., Any], method: Callable[..., Any]) -> Callable[..., Any]:
    """The wrapper with the method's signature and resolved type hints worked out once.

    LangChain asks both of every tool run (``inspect.signature(tool._run)`` for a
    ``run_manager`` parameter, ``get_type_hints`` for a ``RunnableConfig`` one): through
    ``__wrapped__`` that means unwrapping and evaluating the string annotations again on each
    call, which cost more than the guard's own work on the call. Given here, the answers are
    the same (the method's), read off the wrapper. Where either cannot be worked out (a
    forward reference that does not resolve), LangChain keeps working it out as before."""
    with contextlib.suppress(TypeError, ValueError, NameError):
        wrapper.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
        # Read off the wrapper now, the method is not needed through it (and would keep the
        # original tool alive).
        del wrapper.__wrapped__  # type: ignore[attr-defined]
    with contextlib.suppress(Exception):  # unresolvable names: LangChain's look-up fails too
        wrapper.__annotations__ = typing.get_type_hints(method, include_extras=True)
    return wrapper


def _parsing(target: Callable[[], Callable[..., Any] | None]) -> Callable[..., Any]:
    """``_to_args_and_kwargs``, noting in the call's cell what it refused the input with:
    where LangChain validates the arguments against the tool's schema, before ``_run``."""

    def parse(*args: Any, **kwargs: Any) -> Any:
        try:
            return _target(target)(*args, **kwargs)
        except Exception as exc:
            cell = _cell.get()
            if cell is not None:
                cell.refused = exc
            raise

    return parse


def _keeper(
    target: Callable[[], Callable[..., Any] | None], like: Callable[..., Any], is_async: bool
) -> Callable[..., Any]:
    if is_async:

        @functools.wraps(like)
        async def arun(*args: Any, **kwargs: Any) -> Any:
            cell = _cell.get()
            if cell is not None:
                cell.ran = True
            span = None if cell is None else cell.span
            token = None if span is None else span.enter()
            try:
                value = await _target(target)(*args, **kwargs)
            finally:
                if span is not None:
                    span.leave(token)
            if cell is not None:
                cell.append(value)
            return value

        return arun

    @functools.wraps(like)
    def run(*args: Any, **kwargs: Any) -> Any:
        cell = _cell.get()
        if cell is not None:
            cell.ran = True
        span = None if cell is None else cell.span
        token = None if span is None else span.enter()
        try:
            value = _target(target)(*args, **kwargs)
        finally:
            if span is not None:
                span.leave(token)
        if cell is not None:
            cell.append(value)
        return value

    return run


def _target(target: Callable[[], Callable[..., Any] | None]) -> Callable[..., Any]:
    method = target()
    if method is None:  # the tool was freed while something still ran its copy
        raise ReferenceError("toolguard: the tool this running copy calls no longer exists")
    return method


# Copies kept at most: the weak references free a dead tool's copy, this bounds the copies of
# tools something else keeps alive (or that their own copy keeps alive through a field).
_MOST_COPIES = 4096


class RunningCopies:
    """The running copy of each tool object (:func:`capturing_copy`), made on its first call
    and dropped with the tool: an app building its tools per request (closing over the
    request's user, a session, a buffer) must not have every tool it ever ran kept alive by
    a long-lived middleware. By ``id`` (tools are not hashable), each entry holding its tool
    by a weak reference whose callback drops the entry.

    Re-entrant lock: the callback runs wherever the collector frees a tool, which may be
    inside this object's own critical section, in the same thread."""

    def __init__(self, most: int = _MOST_COPIES) -> None:
        self.most = most
        self._copies: dict[int, tuple[weakref.ref[Any], BaseTool | None]] = {}
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._copies)

    def get(self, tool: BaseTool, make: Callable[[BaseTool], BaseTool | None]) -> BaseTool | None:
        key = id(tool)
        entry = self._copies.get(key)
        if entry is not None and entry[0]() is tool:
            return entry[1]
        copy = make(tool)
        try:
            ref = weakref.ref(tool, self._drop(key))
        except TypeError:  # a tool type without weak references: copied for every call
            return copy
        with self._lock:
            while len(self._copies) >= self.most:  # the oldest first (insertion order)
                self._copies.pop(next(iter(self._copies)))
            self._copies[key] = (ref, copy)
        return copy

    def _drop(self, key: int) -> Callable[[weakref.ref[Any]], None]:
        # Holds the entries weakly too: a middleware that is gone leaves nothing to drop.
        owner = weakref.ref(self)

        def drop(ref: weakref.ref[Any]) -> None:
            copies = owner()
            if copies is None:
                return
            with copies._lock:
                entry = copies._copies.get(key)
                if entry is not None and entry[0] is ref:  # not a newer tool's, by a reused id
                    del copies._copies[key]

        return drop
