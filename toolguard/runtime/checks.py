"""The five checks of one call, in the protocol's precedence order.

schema (``check_schema``), dependency (``check_dependencies``), precondition
(``check_conditions`` with the preconditions), state_consistency (``exception_failure``,
``error_result_failure`` and ``check_conditions`` with the postconditions) and information
(``check_grounded``). Each returns the failures it found; the call decides what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .. import _contract as contract
from .conditions import _Condition, shorten
from .schema import SchemaFailure
from .tool import Tool, resolve_path
from .trajectory import Trajectory
from .verdict import NAME_LIMIT, Failure, shorten_text

logger = logging.getLogger("toolguard")

_RANK = {cause: i for i, cause in enumerate(contract.CAUSES)}
_PLACEHOLDERS = frozenset(
    {
        "",
        "unknown",
        "<unknown>",
        "n/a",
        "na",
        "none",
        "null",
        "tbd",
        "todo",
        "placeholder",
        "xxx",
        "...",
        "?",
        "<placeholder>",
        "your_id_here",
        "example",
    }
)


_COLLECTIONS = (list, tuple, set, frozenset)
_NO_BINDINGS: dict[Any, Any] = {}


def check_schema(tool: Tool, raw: dict[str, Any]) -> tuple[dict[str, Any], Failure | None]:
    """The validated arguments, or the raw ones and the schema failure."""
    try:
        return tool.schema.validate(raw), None
    except SchemaFailure as exc:
        return raw, exc.failure


def check_dependencies(tool: Tool, traj: Trajectory, values: Mapping[str, Any]) -> list[Failure]:
    failures = []
    bindings = traj._bindings
    for arg, kind in tool.refs.items():
        value = values.get(arg)
        if value is None:  # an optional reference left out refers to nothing
            continue
        if not isinstance(value, _COLLECTIONS):
            # Hot path: one live binding of a scalar, looked up inline (no Python calls).
            # Anything else (absent, stale, unhashable) takes the full path below.
            try:
                binding = bindings.get(kind, _NO_BINDINGS).get(value)
            except TypeError:
                binding = None
            if binding is not None and binding.live:
                continue
        failure = ref_failure(tool.name, traj, arg, kind, value)
        if failure is not None:
            failures.append(failure)
    for label, root, parts, kind in tool.ref_paths:
        failure = path_failure(tool.name, traj, label, values.get(root), parts, kind)
        if failure is not None:
            failures.append(failure)
    return failures


def ref_failure(tool: str, traj: Trajectory, arg: str, kind: str, value: Any) -> Failure | None:
    """The first item of ``value`` (itself, or each item of a collection) that is no live
    ``kind``: its failure, or None."""
    for item in value if isinstance(value, list | tuple | set | frozenset) else (value,):
        failure = _dependency(tool, traj, arg, kind, item)
        if failure is not None:
            return failure
    return None


def path_failure(
    tool: str, traj: Trajectory, label: str, value: Any, parts: tuple[str, ...], kind: str
) -> Failure | None:
    """``ref_failure`` for the values a path (``arg[].field``) reaches inside ``value``."""
    for item in resolve_path(value, parts):
        failure = _dependency(tool, traj, label, kind, item)
        if failure is not None:
            return failure
    return None


def _dependency(tool: str, traj: Trajectory, arg: str, kind: str, value: Any) -> Failure | None:
    binding = traj.lookup(kind, value)
    if binding is not None and binding.live:
        return None
    shown = shorten(value)
    # Only values the model has seen: never ids the application bound without showing them
    # (another user's, say: `traj.bind(..., shown=False)`).
    candidates = traj.live_values(kind, shown_only=True)
    offer = (
        f"Use one of the {kind} values you have: {', '.join(shorten(c) for c in candidates[:8])}."
        if candidates
        else f"No {kind} is known yet: first call a tool that returns one."
    )
    if binding is not None:
        by = binding.invalidated_by or "an earlier call"
        return Failure(
            contract.DEPENDENCY,
            f"dependency.{arg}",
            f"{arg}={shown} is a stale {kind}: invalidated by {by}",
            f"`{arg}` refers to {kind} {shown}, which {by} invalidated. {offer}",
            telemetry_message=f"{arg} is a stale {kind}: invalidated by {by}",
        )
    other = traj.kinds_of(value)
    if other:
        return Failure(
            contract.DEPENDENCY,
            f"dependency.{arg}",
            f"{arg}={shown} is a {other[0]}, not a {kind}",
            f"`{arg}` needs a {kind}, but {shown} is a {other[0]}. {offer}",
            telemetry_message=f"{arg} is a {other[0]}, not a {kind}",
        )
    where = shorten_text(traj.id, NAME_LIMIT)  # an id another process may have sent
    return Failure(
        contract.DEPENDENCY,
        f"dependency.{arg}",
        f"{arg}={shown} is no {kind} produced earlier in trajectory {where}",
        f"`{arg}` must be a {kind} taken from an earlier tool result; {shown} is not one. {offer}",
        telemetry_message=f"{arg} is no {kind} produced earlier in trajectory {where}",
    )


def check_conditions(
    conditions: tuple[_Condition, ...],
    prefix: str,
    cause: str,
    context: Mapping[str, Any],
    values: Mapping[str, Any],
    fail_open: bool,
    stop_at_first: bool,
    *,
    unvalidated: bool = False,
    record_content: bool = False,
) -> list[Failure]:
    failures = []
    for condition in conditions:
        check = f"{prefix}.{condition.id}"
        try:
            holds, given = condition.evaluate(context, values)
        except Exception as exc:
            if unvalidated:
                # Log mode after a schema failure: the predicate saw ill-typed values, so its
                # exception says nothing about the guard; the schema failure already counts.
                logger.debug("toolguard: %s raised on arguments that failed the schema", check)
                continue
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


def check_grounded(tool: Tool, traj: Trajectory | None, values: Mapping[str, Any]) -> list[Failure]:
    failures = []
    for arg in tool.grounded:
        if arg not in values:
            continue
        value = values[arg]
        placeholder = ungrounded(traj, value)
        if placeholder is not None:
            failures.append(grounded_failure(arg, value, placeholder))
    return failures


def ungrounded(traj: Trajectory | None, value: Any) -> bool | None:
    """None when ``value`` is grounded; else whether it is a placeholder (True) or a value
    the trajectory never saw (False). A value that cannot be rendered as text (nested past
    the interpreter's depth, a ``__str__`` that raises) cannot have been said: not grounded."""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:  # RecursionError included
        return False
    if is_placeholder(text):
        return True
    return None if traj is None or traj.has_seen(text) else False


def is_placeholder(text: str) -> bool:
    """``"<unknown>"``, ``"TBD"``, ``"{id}"``...: a value the model made up to fill a slot."""
    return text.strip().lower() in _PLACEHOLDERS or (
        len(text) > 1 and text[0] + text[-1] in ("<>", "{}", "[]")
    )


def grounded_failure(arg: str, value: Any, placeholder: bool) -> Failure:
    """A grounded argument holding a placeholder, or a value the trajectory never saw."""
    what = "a placeholder" if placeholder else "a value that appears nowhere in the conversation"
    return Failure(
        contract.INFORMATION,
        f"information.{arg}",
        f"{arg}={shorten(value)} is {what}",
        f"`{arg}`={shorten(value)} is {what}: do not guess it. "
        "Ask the user for it or look it up with a tool first.",
        telemetry_message=f"{arg} is {what}",
    )


def bind_failure(tool: Tool, exc: TypeError) -> Failure:
    """Positional and keyword arguments that do not fit the function's signature."""
    name, text = shorten_text(tool.name, NAME_LIMIT), shorten_text(str(exc), 300)
    return Failure(
        contract.SCHEMA,
        "schema.args",
        f"{name}: {text}",
        f"The call to `{name}` is malformed: {text}. Call it with arguments matching "
        f"{tool.schema.hint}.",
    )


def guard_error(
    check: str, cause: str, what: str, exc: Exception, fail_open: bool, record_content: bool
) -> Failure | None:
    """A check that raised: a failure of that check (fail closed), or a loud pass.

    The log names the check and the exception's type; its text and traceback (which may
    hold argument values) only with ``record_content``.
    """
    detail = f"{type(exc).__name__}: {shorten(str(exc))}"
    logged = detail if record_content else type(exc).__name__
    trace = exc if record_content else None
    if fail_open:
        logger.warning(
            "toolguard: %s raised %s; failing open (the check counts as passed)",
            what,
            logged,
            exc_info=trace,
        )
        return None
    logger.error("toolguard: %s raised %s; failing closed", what, logged, exc_info=trace)
    return Failure(
        cause,
        check,
        f"guard error: {what} raised {detail} (fail closed)",
        f"This call could not be verified ({what} could not be evaluated), so it was not "
        "accepted. Try a different call.",
        guard_error=True,
        telemetry_message=f"guard error: {what} raised {type(exc).__name__} (fail closed)",
    )


def exception_failure(tool: str, exc: BaseException) -> Failure:
    """The environment rejected the call by raising."""
    tool, kind, text = shorten_text(tool, NAME_LIMIT), type(exc).__name__, _text(exc)
    return Failure(
        contract.STATE_CONSISTENCY,
        "state.exception",
        f"{tool} raised {kind}: {shorten_text(text, 800)}",
        f"`{tool}` failed: {kind}: {shorten_text(text, 300)}",
        telemetry_message=f"{tool} raised {kind}",
    )


def error_result_failure(tool: str, result: Any) -> Failure:
    """The environment rejected the call in its answer (an error flag or marker)."""
    shown = shorten(result)
    return Failure(
        contract.STATE_CONSISTENCY,
        "state.error_result",
        f"the environment rejected the call: {shown}",
        f"`{shorten_text(tool, NAME_LIMIT)}` was rejected by the environment: "
        f"{shorten_text(_text(result), 300)}",
        telemetry_message="the environment rejected the call (an error result)",
    )


def _text(value: Any) -> str:
    """str() of a value whose __str__ may raise or run on (a hostile exception or result)."""
    try:
        return str(value)[:2000]
    except Exception:
        return f"<{type(value).__name__}>"


def default_error_result(result: Any) -> bool:
    """A mapping with a non-empty ``"error"`` value is the environment's rejection.

    ``{"error": None}`` / ``{"error": ""}`` / ``{"error": False}`` say there was none.
    """
    if not isinstance(result, Mapping) or "error" not in result:
        return False
    value = result["error"]
    return value is not None and value is not False and value != "" and value != {}
