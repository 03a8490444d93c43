"""The condition stages: preconditions before the call (cause ``precondition``) and
postconditions after it (``state_consistency``).

Each condition's parameters are resolved once, when the tool is declared: which of them are
arguments, which the guard's state, the instance, all arguments or the result. A call then
only gathers the values. A condition class that overrides ``evaluate`` or ``describe``, or a
predicate taking ``**kwargs``, is asked through ``evaluate`` as it defines it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from inspect import CO_VARARGS, CO_VARKEYWORDS
from types import FunctionType
from typing import TYPE_CHECKING, Any, cast

from ... import _contract as contract
from ..tools.conditions import _Condition
from ..verdict import Failure
from .guard_error import guard_error
from .stage import CheckStage

if TYPE_CHECKING:
    from ..calls.call import _Call

logger = logging.getLogger("toolguard")

# Where a predicate's parameter comes from (resolved once per condition).
_ARG, _ALL_ARGS, _STATE, _INSTANCE, _RESULT = range(5)


class _Resolved:
    """One condition with its parameters' sources decided."""

    __slots__ = ("check", "condition", "general", "predicate", "sources")

    def __init__(self, condition: _Condition, prefix: str, post: bool) -> None:
        self.condition = condition
        self.check = f"{prefix}.{condition.id}"
        self.predicate = condition.predicate
        kind = type(condition)
        # A class of its own making decides itself how it is evaluated and described.
        self.general = (
            condition._takes_kwargs
            or kind.evaluate is not _Condition.evaluate
            or kind.describe is not _Condition.describe
        )
        self.sources = tuple((name, _source(name, post)) for name in condition._params)


def _source(name: str, post: bool) -> int:
    """What ``_Condition.evaluate`` hands a parameter of this name (an argument of the tool
    never shares a name with the context: the declaration refuses that)."""
    if name == "args":
        return _ALL_ARGS
    if name in ("state", "guard_state"):
        return _STATE
    if name == "instance":
        return _INSTANCE
    if name == "result" and post:
        return _RESULT
    return _ARG  # before the call, `result` is whatever the arguments hold under that name


def condition_stage(
    conditions: tuple[_Condition, ...], prefix: str, cause: str
) -> Callable[[_Call, Mapping[str, Any], bool, bool, Any], list[Failure] | None] | None:
    """The stage checking ``conditions`` (None when there are none): ``stage(call, values,
    stop, unvalidated, result)``."""
    if not conditions:
        return None
    post = prefix == "postcondition"
    resolved = tuple(_Resolved(c, prefix, post) for c in conditions)

    def check(
        call: _Call,
        values: Mapping[str, Any],
        stop: bool,
        unvalidated: bool,
        result: Any = None,
    ) -> list[Failure] | None:
        found: list[Failure] | None = None
        for one in resolved:
            try:
                if one.general:
                    holds, given = one.condition.evaluate(_context(call, result, post), values)
                else:
                    given = {}  # one.gather, inline: once per condition and call
                    for name, source in one.sources:
                        if source == _ARG:
                            given[name] = values.get(name)
                        elif source == _STATE:
                            given[name] = call._guard.state
                        elif source == _INSTANCE:
                            given[name] = call._instance
                        elif source == _ALL_ARGS:
                            given[name] = dict(values)
                        else:
                            given[name] = result
                    holds = bool(one.predicate(**given))
            except Exception as exc:
                if unvalidated:
                    # Log mode after a schema failure: the predicate saw ill-typed values, so
                    # its exception says nothing about the guard; the schema failure counts.
                    logger.debug(
                        "toolguard: %s raised on arguments that failed the schema", one.check
                    )
                    continue
                guard = call._guard
                failure = condition_error(
                    one.condition, one.check, cause, exc, guard.fail_open, guard.record_content
                )
                if failure is None:
                    continue
            else:
                if holds:
                    continue
                failure = condition_failure(one.condition, one.check, cause, given)
            if found is None:
                found = []
            found.append(failure)
            if stop:
                break
        return found

    if len(resolved) == 1 and not resolved[0].general and not post:
        one = resolved[0]
        if all(source in (_ARG, _STATE) for _, source in one.sources):
            names = tuple(name for name, _ in one.sources)
            if 1 <= len(names) <= 2 and _positional(one.predicate, names):
                return _positional_condition(one, cause)
            return _one_condition(one, cause)
    return check


def _positional(predicate: Callable[..., Any], names: tuple[str, ...]) -> bool:
    """Whether calling ``predicate`` with the values of ``names`` in order binds them as
    calling it by keyword does: a plain function whose parameters are exactly these, each
    positional-or-keyword. (``_params`` comes from ``inspect.signature``, which describes
    what a wrapper wraps: a wrapper's own code then differs, and it is called by keyword.)"""
    if type(predicate) is not FunctionType:
        return False
    code = predicate.__code__
    if code.co_flags & (CO_VARARGS | CO_VARKEYWORDS) or code.co_posonlyargcount:
        return False
    return code.co_kwonlyargcount == 0 and code.co_varnames[: code.co_argcount] == names


def _one_condition(
    one: _Resolved, cause: str
) -> Callable[[_Call, Mapping[str, Any], bool, bool, Any], list[Failure] | None]:
    """``condition_stage``'s check for a tool with one precondition that reads only
    arguments and the guard's state (most tools that declare any): its parameters gathered
    without asking each one's source."""
    predicate = one.predicate
    arg_names = tuple(name for name, source in one.sources if source == _ARG)
    state_names = tuple(name for name, source in one.sources if source == _STATE)

    def check_one(
        call: _Call,
        values: Mapping[str, Any],
        stop: bool,
        unvalidated: bool,
        result: Any = None,
    ) -> list[Failure] | None:
        given = {}
        for name in arg_names:
            given[name] = values.get(name)
        if state_names:
            state = call._guard.state
            for name in state_names:
                given[name] = state
        try:
            if predicate(**given):
                return None
        except Exception as exc:
            return _raised(one, cause, call, exc, unvalidated)
        in_order = {name: given[name] for name, _ in one.sources}  # as the predicate lists them
        return [condition_failure(one.condition, one.check, cause, in_order)]

    return check_one


def _raised(
    one: _Resolved, cause: str, call: _Call, exc: Exception, unvalidated: bool
) -> list[Failure] | None:
    """A predicate that raised: no failure on arguments the schema refused (as in
    condition_stage's check), else the guard error (fail closed) or None (fail open)."""
    if unvalidated:
        logger.debug("toolguard: %s raised on arguments that failed the schema", one.check)
        return None
    guard = call._guard
    failure = condition_error(
        one.condition, one.check, cause, exc, guard.fail_open, guard.record_content
    )
    return None if failure is None else [failure]


def _positional_condition(
    one: _Resolved, cause: str
) -> Callable[[_Call, Mapping[str, Any], bool, bool, Any], list[Failure] | None]:
    """``_one_condition`` for a plain function of one or two parameters (``_positional``):
    called with its values in order, without building a mapping for ``**`` (which the call
    copies again); the mapping is built only for a failure's message."""
    predicate = one.predicate
    ((first, first_source), *rest) = one.sources
    second, second_source = rest[0] if rest else ("", _ARG)
    first_is_state = first_source == _STATE
    second_is_state = second_source == _STATE
    reads_state = first_is_state or second_is_state
    two = bool(rest)

    def check_positional(
        call: _Call,
        values: Mapping[str, Any],
        stop: bool,
        unvalidated: bool,
        result: Any = None,
    ) -> list[Failure] | None:
        state = call._guard.state if reads_state else None
        a = state if first_is_state else values.get(first)
        try:
            if two:
                b = state if second_is_state else values.get(second)
                if predicate(a, b):
                    return None
            elif predicate(a):
                return None
        except Exception as exc:
            return _raised(one, cause, call, exc, unvalidated)
        given = {first: a, second: b} if two else {first: a}  # as the predicate lists them
        return [condition_failure(one.condition, one.check, cause, given)]

    return check_positional


def precondition_stage(conditions: tuple[_Condition, ...]) -> CheckStage | None:
    """The preconditions' stage: ``condition_stage``'s check itself, whose ``result``
    parameter defaults to None before the call (one Python call less per call)."""
    stage = condition_stage(conditions, "precondition", contract.PRECONDITION)
    return cast("CheckStage | None", stage)


def _context(call: _Call, result: Any, post: bool) -> dict[str, Any]:
    context = {"state": call._guard.state, "instance": call._instance}
    if post:
        context["result"] = result
    return context


def check_conditions(
    conditions: tuple[_Condition, ...],
    prefix: str,
    cause: str,
    context: Mapping[str, Any],
    values: Mapping[str, Any],
    fail_open: bool,
    stop_at_first: bool,
    *,
    record_content: bool = False,
) -> list[Failure]:
    """Conditions evaluated against an explicit ``context`` (plan verification's steps,
    which have no call): the same failures as the stages."""
    failures = []
    for condition in conditions:
        check = f"{prefix}.{condition.id}"
        try:
            holds, given = condition.evaluate(context, values)
        except Exception as exc:
            failure = condition_error(condition, check, cause, exc, fail_open, record_content)
            if failure is None:
                continue
            failures.append(failure)
        else:
            if holds:
                continue
            failures.append(condition_failure(condition, check, cause, given))
        if stop_at_first:
            break
    return failures


def condition_failure(
    condition: _Condition, check: str, cause: str, given: Mapping[str, Any]
) -> Failure:
    """A condition that does not hold for the values it was ``given``."""
    text = condition.describe(given)
    return Failure(
        cause,
        check,
        f"{check} failed: {text}",
        f"Condition `{condition.id}` is not met: {text}. "
        "Change the arguments or first bring the state to where it holds.",
        telemetry_message=f"{check} failed: "
        + (condition.message or f"condition {condition.id!r} does not hold"),
    )


def condition_error(
    condition: _Condition,
    check: str,
    cause: str,
    exc: Exception,
    fail_open: bool,
    record_content: bool,
) -> Failure | None:
    """A condition whose predicate raised: its failure (fail closed) or None (fail open)."""
    return guard_error(check, cause, f"condition {condition.id!r}", exc, fail_open, record_content)
