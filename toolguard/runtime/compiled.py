"""Each tool's call path compiled once, when the tool is declared, from its contract.

The general path (``PendingCall`` with ``checks.py``) reads every declaration at every call
and pays a Python call for each step: about 45 per guarded call. This module writes, for one
:class:`Tool`, the Python source of the same pipeline specialised to what the tool declares
(its references, its conditions with their parameters resolved, its grounded arguments, its
``produces`` places, its schema's validator) and compiles it with ``exec``: one function per
entry point (the wrapped function called directly, dispatch by name, the two-phase check),
straight-line code in between, no loop over declarations and no Python call the general path
does not also make to user code.

One source of truth: the source is generated from the same compiled :class:`Tool` the
general path reads, and every failure is built by the same function of ``checks.py`` (the
message texts exist once). What differs is only the control flow around them, and
``tests/test_compiled_equivalence.py`` (hypothesis) runs random contracts and random call
sequences through both and compares verdicts, T, FED, causes, bindings and span attributes.

Anything unusual takes the general path, decided before the call has any effect: log mode,
``record_content``, a call nested in another guarded call, no trajectory while others are
open (the warning), an ended trajectory, a framework span to reuse (after the step is taken:
then the general path continues from a ``PendingCall`` holding that step). Whatever happens
after the checks but the plain success (a rejection, an exception, an environment error, a
failed postcondition, an ended trajectory) is closed by ``PendingCall`` itself, made from
the call's state: the rare outcomes keep one implementation.

A tool the compiler does not cover (a JSON Schema without properties, a condition taking
``**kwargs`` or a condition class overriding ``evaluate``) is not compiled: all its calls take
the general path.
"""

from __future__ import annotations

import itertools
import linecache
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, NoOpTracer, ProxyTracer

from .. import _contract as contract
from .._errors import ToolCallRejected
from . import telemetry as tel
from .call import PendingCall, _inside_tool
from .checks import (
    _COLLECTIONS,
    _NO_BINDINGS,
    bind_failure,
    condition_error,
    condition_failure,
    default_error_result,
    error_result_failure,
    grounded_failure,
    guard_error,
    is_placeholder,
    path_failure,
    ref_failure,
)
from .conditions import _Condition
from .schema import SchemaFailure, parse_arguments
from .tool import _KEY_CONTAINERS, _LEAVES, Tool, _find_key, find_key_into
from .trajectory import Trajectory, _Binding, _current, _open
from .verdict import Failure, Rejection

if TYPE_CHECKING:
    from .guard import Guard

logger = logging.getLogger("toolguard")

ENABLED = True  # a guard made while False takes the general path for every call (tests)

_counter = itertools.count()
_CODE: dict[str, Any] = {}  # generated source -> its code object


class CompiledTool:
    """The generated entry points of one tool; see :func:`compile_tool`."""

    def __init__(self, tool: Tool, source: str, namespace: dict[str, Any]) -> None:
        self.tool = tool
        self.source = source
        self.make_direct: Callable[..., Callable[..., Any]] = namespace["make_direct"]
        self.make_dispatch: Callable[..., Callable[..., Any]] = namespace["make_dispatch"]
        self.run_checks: Callable[[PendingCall, dict[str, Any]], None] = namespace["run_checks"]

    def __repr__(self) -> str:
        return f"CompiledTool({self.tool.name!r})"


def compile_tool(tool: Tool) -> CompiledTool | None:
    """The tool's compiled pipeline (built once per Tool), or None when not covered."""
    cached = tool._compiled_code
    if cached is not False:
        return cached  # type: ignore[no-any-return]
    compiled = _compile(tool) if _covered(tool) else None
    tool._compiled_code = compiled
    return compiled


def _covered(tool: Tool) -> bool:
    names = tool.schema.names
    for condition in (*tool.preconditions, *tool.postconditions):
        if names is None or condition._takes_kwargs:
            return False
        kind = type(condition)
        if kind.evaluate is not _Condition.evaluate or kind.describe is not _Condition.describe:
            return False
    return True


# -- the generated source ---------------------------------------------------------------------


class _Source:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0
        self.env: dict[str, Any] = {}

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def const(self, prefix: str, value: Any) -> str:
        """A name in the generated module's globals bound to ``value``."""
        for name, known in self.env.items():
            if known is value and name.startswith(prefix):
                return name
        name = f"{prefix}{len(self.env)}"
        self.env[name] = value
        return name

    def indent(self) -> _Indent:
        return _Indent(self)


class _Indent:
    def __init__(self, src: _Source) -> None:
        self.src = src

    def __enter__(self) -> None:
        self.src.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.src.depth -= 1


def _compile(tool: Tool) -> CompiledTool:
    src = _Source()
    src.env.update(_RUNTIME)
    src.env.update(_binder(tool))
    src.env.update(TOOL=tool, SPEC=tool.spec, NAME=tool.name)
    _emit_run_checks(src, tool)
    _emit_make_direct(src, tool)
    _emit_make_dispatch(src, tool)
    source = "\n".join(src.lines) + "\n"
    # The source depends only on the contract's shape (names, kinds, check ids; the values
    # are in the namespace), so tools of one shape share one code object: a guard of 10,000
    # tools compiles a few sources, not 10,000.
    code = _CODE.get(source)
    if code is None:
        filename = f"<toolguard compiled #{next(_counter)}>"
        # Tracebacks through the generated code show its lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile(source, filename, "exec")
        if len(_CODE) < 4096:
            _CODE[source] = code
    namespace = dict(src.env)
    exec(code, namespace)
    return CompiledTool(tool, source, namespace)


def _emit_prologue(src: _Source, nested_fallback: str) -> None:
    """Mode, content recording: the general path for the unusual."""
    src("guard = GUARD")
    src('if (SPEC.mode or guard.mode) != "block" or guard.record_content:')
    with src.indent():
        src(nested_fallback)


def _emit_span(src: _Source, call_id: str, reused: str) -> None:
    """The call span: none from a no-op tracer (what start_call_span does, inline)."""
    src("tracer = guard.tracer")
    src("kind = type(tracer)")
    src("if kind is _ProxyTracer:")
    with src.indent():
        src('kind = type(getattr(tracer, "_tracer", None))')
    src("if kind is _NoOpTracer:")
    with src.indent():
        src("span = _INVALID_SPAN")
        src("recording = False")
    src("else:")
    with src.indent():
        src(
            "attributes = _call_attributes(NAME, traj.id if traj is not None else None, step, "
            f"{call_id}, traj.conversation_id if traj is not None else None)"
        )
        src(
            "span = _start_call_span(tracer, NAME, guard.reuse_framework_spans, attributes, "
            "traj._span if traj is not None else None)"
        )
        src("if span is _REUSED:")
        with src.indent():
            src(reused)
        src("recording = span is not _INVALID_SPAN and span.is_recording()")


def _emit_step(src: _Source, call_id: str | None) -> None:
    """The step a call takes (Trajectory.step_for inline) and the registry's clock."""
    src("if traj is not None:")
    with src.indent():
        if call_id is not None:
            src("if step is None:")
            src.depth += 1
            src(f"if {call_id} is not None and traj._reserved:")
            with src.indent():
                src(f"step = traj.step_for({call_id})")
            src("else:")
            src.depth += 1
        src("with traj._lock:")
        with src.indent():
            src("traj._length += 1")
            src("step = traj._length")
        if call_id is not None:
            src.depth -= 2
        src("if traj._registry is not None:")
        with src.indent():
            src("traj._registry.touch(traj)")
    if call_id is None:
        src("else:")
        with src.indent():
            src("step = None")


def _emit_schema(src: _Source, tool: Tool) -> None:
    """``values`` from ``raw``: the schema's validate, inline for a pydantic model."""
    parts = tool.schema.model
    if parts is None:
        src("try:")
        with src.indent():
            src(f"values = {src.const('VALIDATE', tool.schema.validate)}(raw)")
        src("except _SchemaFailure as exc:")
        with src.indent():
            src("values = raw")
            src("failure = exc.failure")
        return
    if parts.accepted is not None:
        src(f"if not {src.const('ACCEPTED', parts.accepted)}.issuperset(raw):")
        with src.indent():
            src(f"failure = {src.const('UNKNOWN', parts.unknown_failure)}(raw)")
            src("if failure is not None:")
            with src.indent():
                src("failure = failure.failure")
    values_of = src.const("VALUES_OF", parts.values_of)
    retry = src.const("RETRY", parts.retry)
    src("if failure is None:")
    with src.indent():
        src("try:")
        with src.indent():
            if parts.validate_fields is not None:
                # The fields dict the model would hold, without making the model.
                fields = src.const("VALIDATE_FIELDS", parts.validate_fields)
                src(f"values, extra, _ = {fields}(raw, strict={parts.strict!r})")
            else:
                model = src.const("VALIDATE_PYTHON", parts.validate_python)
                src(f"model = {model}(raw, strict={parts.strict!r})")
        src("except _ValidationError as exc:")
        with src.indent():
            src("try:")
            with src.indent():
                src(f"values = {values_of}({retry}(raw, exc))")
            src("except _SchemaFailure as exc2:")
            with src.indent():
                src("failure = exc2.failure")
                src("values = raw")
        src("else:")
        with src.indent():
            if parts.validate_fields is not None:
                src("if extra:" if parts.keep_extra else "pass")
                if parts.keep_extra:
                    with src.indent():
                        src("values.update(extra)")
            elif parts.keep_extra:
                src(f"values = {values_of}(model)")
            else:
                src("values = dict(model.__dict__)")
                src(f"if len(values) != {parts.field_count}:")
                with src.indent():
                    src(f"values = {values_of}(model)")
    src("else:")
    with src.indent():
        src("values = raw")


def _emit_refs(src: _Source, tool: Tool) -> None:
    """The dependency check (check_dependencies), one block per declared reference."""
    if not (tool.refs or tool.ref_paths):
        return
    src("if failure is None and traj is not None:")
    with src.indent():
        src("bindings = traj._bindings")
        for arg, kind in tool.refs.items():
            src("if failure is None:")
            with src.indent():
                src(f"value = values.get({arg!r})")
                src("if value is not None:")
                with src.indent():
                    src("binding = None")
                    src("if not isinstance(value, _COLLECTIONS):")
                    with src.indent():
                        src("try:")
                        with src.indent():
                            src(f"binding = bindings.get({kind!r}, _NO_BINDINGS).get(value)")
                        src("except TypeError:")
                        with src.indent():
                            src("binding = None")
                    src("if binding is None or not binding.live:")
                    with src.indent():
                        src(f"failure = _ref_failure(NAME, traj, {arg!r}, {kind!r}, value)")
        for label, root, parts, kind in tool.ref_paths:
            src("if failure is None:")
            with src.indent():
                src(
                    f"failure = _path_failure(NAME, traj, {label!r}, values.get({root!r}), "
                    f"{parts!r}, {kind!r})"
                )


def _emit_condition(
    src: _Source, condition: _Condition, index: int, prefix: str, post: bool, on_fail: str
) -> None:
    """One condition: its predicate called with its parameters resolved now (what
    _Condition.evaluate decides per call), the failure built by checks.py."""
    cond = src.const("COND", condition)
    pred = src.const("PRED", condition.predicate)
    check = f"{prefix}.{condition.id}"
    cause = contract.STATE_CONSISTENCY if post else contract.PRECONDITION
    given = []
    for name in condition._params:
        if name == "args":
            expr = "dict(values)"
        elif name in ("state", "guard_state"):
            expr = "guard.state"
        elif name == "instance":
            expr = "owner"
        elif name == "result" and post:
            expr = "result"
        else:  # an argument (or `result` before the call: whatever the arguments hold)
            expr = f"values.get({name!r})"
        given.append((name, f"g{index}_{name}", expr))
    src("try:")
    with src.indent():
        for _, local, expr in given:
            src(f"{local} = {expr}")
        call = ", ".join(f"{name}={local}" for name, local, _ in given)
        src(f"bad = not {pred}({call})")
    src("except Exception as exc:")
    with src.indent():
        src(
            f"found = _condition_error({cond}, {check!r}, {cause!r}, exc, guard.fail_open, "
            "guard.record_content)"
        )
        src("if found is not None:")
        with src.indent():
            src(on_fail.format(failure="found"))
    src("else:")
    with src.indent():
        src("if bad:")
        with src.indent():
            mapping = ", ".join(f"{name!r}: {local}" for name, local, _ in given)
            src(f"found = _condition_failure({cond}, {check!r}, {cause!r}, {{{mapping}}})")
            src(on_fail.format(failure="found"))


def _emit_preconditions(src: _Source, tool: Tool) -> None:
    for i, condition in enumerate(tool.preconditions):
        src("if failure is None:")
        with src.indent():
            _emit_condition(src, condition, i, "precondition", False, "failure = {failure}")


def _emit_grounded(src: _Source, tool: Tool) -> None:
    """The information check (check_grounded), one block per grounded argument."""
    for arg in tool.grounded:
        src(f"if failure is None and {arg!r} in values:")
        with src.indent():
            src(f"value = values[{arg!r}]")
            src("placeholder = _is_placeholder(value if isinstance(value, str) else str(value))")
            src("if placeholder or (traj is not None and not traj.has_seen(value)):")
            with src.indent():
                src(f"failure = _grounded_failure({arg!r}, value, placeholder)")


def _emit_checks(src: _Source, tool: Tool) -> None:
    """From ``raw`` to ``values`` and ``failure`` (None: admitted), block mode."""
    src("failure = None")
    _emit_schema(src, tool)
    _emit_refs(src, tool)
    _emit_preconditions(src, tool)
    _emit_grounded(src, tool)


def _emit_run_checks(src: _Source, tool: Tool) -> None:
    """PendingCall.run_checks for a block-mode call without content recording."""
    src("def run_checks(pending, raw):")
    with src.indent():
        src("guard = pending.guard")
        src("traj = pending.traj")
        src("owner = pending.instance")
        _emit_checks(src, tool)
        src("pending.arguments = values")
        src("if failure is not None:")
        with src.indent():
            src("pending.reject(failure)")
    src("")


def _emit_post(src: _Source, tool: Tool) -> None:
    """After the tool returned ``result``: PendingCall.finish, its plain success inline."""
    src("failures = None")
    src("detect = SPEC.error_result")
    src("if detect is None:")
    with src.indent():
        src("detect = guard.error_result")
    src("error = None")
    src("if detect:")
    with src.indent():
        src("try:")
        with src.indent():
            src("if detect is _default_error_result and type(result) is dict:")
            with src.indent():
                src('if "error" in result:')
                with src.indent():
                    src('e = result["error"]')
                    src('error = bool(e is not None and e is not False and e != "" and e != {})')
                src("else:")
                with src.indent():
                    src("error = False")
            src("else:")
            with src.indent():
                src("error = bool(detect(result))")
        src("except Exception as exc:")
        with src.indent():
            src(
                'found = _guard_error("state.error_result", _STATE, "the error_result '
                'predicate", exc, guard.fail_open, guard.record_content)'
            )
            src("if found is not None:")
            with src.indent():
                src("failures = [found]")
    src("if error:")
    with src.indent():
        src("found = _error_result_failure(NAME, result)")
        src("if failures is None:")
        with src.indent():
            src("failures = [found]")
        src("else:")
        with src.indent():
            src("failures.append(found)")
    add = "failures = [{failure}] if failures is None else failures + [{failure}]"
    for i, condition in enumerate(tool.postconditions):
        _emit_condition(src, condition, i, "postcondition", True, add)
    updates = bool(tool.produces or tool.invalidates)
    src("if not error and traj is not None" + (":" if updates else " and guard.observes_outputs:"))
    with src.indent():
        src("try:")
        with src.indent():
            for kind, find in tool.produces:
                key = _key_place(find)
                if key is not None:
                    _emit_find_key(src, key, kind)
                else:
                    src(f"for value in {src.const('FIND', find)}(result) or ():")
                    with src.indent():
                        src(f"traj._produce({kind!r}, value, NAME, step)")
            for arg, kind in tool.invalidates.items():
                src(f"value = values.get({arg!r})")
                src("for item in value if isinstance(value, list | tuple) else (value,):")
                with src.indent():
                    src(f'traj._invalidate({kind!r}, item, f"{{NAME}} at step {{step}}")')
            src("if guard.observes_outputs:")
            with src.indent():
                src("traj.observe(result)")
        src("except Exception:")
        with src.indent():
            src('_logger.exception("toolguard: reading the result of %s failed", NAME)')


def _emit_find_key(src: _Source, key: str, kind: str) -> None:
    """``produces={key: kind}``: find_key_into with its top-level dict inline, then
    Trajectory._produce for each value found (also those found before an exception)."""
    src("found = []")
    src("try:")
    with src.indent():
        # A flat dict (scalar values: most tool results) holds the key at most once, as a
        # scalar: the walk below would find exactly result[key]. (A key equal to the name
        # under another hash, which breaks Python's hash contract, is not looked at.)
        src("if type(result) is dict and _LEAVES.issuperset(map(type, result.values())):")
        with src.indent():
            src(f"if {key!r} in result:")
            with src.indent():
                src(f"found.append(result[{key!r}])")
        src("elif type(result) is dict:")
        with src.indent():
            src("for k, v in result.items():")
            with src.indent():
                src("if type(k) is not str:")
                with src.indent():
                    src(f"found.extend(_find_key({{k: v}}, {key!r}, 0))")
                src(f"elif k == {key!r}:")
                with src.indent():
                    src("if type(v) in _LEAVES or not isinstance(v, _KEY_CONTAINERS):")
                    with src.indent():
                        src("found.append(v)")
                    src("elif isinstance(v, list | tuple):")
                    with src.indent():
                        src("found.extend(x for x in v if not isinstance(x, _KEY_CONTAINERS))")
                    src("else:")
                    with src.indent():
                        src(f"_find_key_into(v, {key!r}, found, 1)")
                src("elif type(v) not in _LEAVES:")
                with src.indent():
                    src(f"_find_key_into(v, {key!r}, found, 1)")
        src("else:")
        with src.indent():
            src(f"_find_key_into(result, {key!r}, found)")
    src("finally:")
    with src.indent():
        src("known = None")
        src("for value in found:")
        with src.indent():
            src("if value is None:")
            with src.indent():
                src("continue")
            src("try:")
            with src.indent():
                src("hash(value)")
            src("except TypeError:")
            with src.indent():
                src("continue")
            src("if known is None:")
            with src.indent():
                src(f"known = traj._bindings.get({kind!r})")
                src("if known is None:")
                with src.indent():
                    src(f"known = traj._bindings.setdefault({kind!r}, {{}})")
            src("known[value] = _Binding(True, NAME, step, None, True)")


def _emit_close(src: _Source, call_id: str, in_pending: bool) -> None:
    """Close the call that ran: the plain success inline, anything else by PendingCall."""
    src("if failures is not None or (traj is not None and traj.ended):")
    with src.indent():
        if in_pending:
            src("pending.failures = failures or []")
            src("pending._close(executed=True)")
        else:
            src(
                f"_close_ran(guard, owner, {call_id}, traj, step, span, recording, values, "
                "failures or [])"
            )
    src("else:")
    with src.indent():
        if in_pending:
            src("pending.decision = _ALLOWED")
        src("if traj is not None:")
        with src.indent():
            src(f"traj._verdicts.append((step, NAME, _ALLOWED, [], {call_id}))")
        src("if recording:")
        with src.indent():
            src("try:")  # telemetry.set_attributes, inline
            with src.indent():
                src("span.set_attributes(_VALID_ATTRIBUTES)")
            src("except Exception:")
            with src.indent():
                src('_logger.exception("toolguard: could not set span attributes")')
        src("if span is not _INVALID_SPAN:")
        with src.indent():
            src("try:")  # telemetry.end_span, inline
            with src.indent():
                src("span.end()")
            src("except Exception:")
            with src.indent():
                src(
                    '_logger.exception("toolguard: ending a span failed; the tool call is '
                    'unaffected")'
                )


def _emit_run(src: _Source, tool: Tool, call_id: str, fn: str, dispatch: bool) -> None:
    """Run the admitted call (the span current, nested calls marked), then close it.

    A sync call keeps its state in locals. An async one keeps it in a PendingCall, as the
    general path does: a coroutine dropped without being awaited is then cancelled when the
    PendingCall is collected, exactly as there."""
    in_pending = tool.is_async
    if in_pending:
        for local in ("guard", "traj", "step", "span", "recording"):
            src(f"{local} = pending.{local}")
        src("owner = pending.instance")
        src("values = pending.arguments")
    if tool._posonly or tool._varpos is not None:
        src("a, k = TOOL.call_parts(values)")
        invoke = f"{fn}(*a, **k)"
    else:
        invoke = f"{fn}(**values)"
    if in_pending:
        src("pending.enter()")
        src("try:")
        with src.indent():
            src(f"result = await {invoke}")
        src("except BaseException as exc:")
        with src.indent():
            src("rejection = pending.fail(exc)")
            if dispatch:
                src("if isinstance(exc, Exception):")
                with src.indent():
                    src("return rejection")
            src("raise")
        src("pending.leave()")
    else:
        src("token = None")
        src("if recording:")
        with src.indent():
            src("try:")  # telemetry.attach, inline
            with src.indent():
                src("token = _otel_attach(_set_span_in_context(span))")
            src("except Exception:")
            with src.indent():
                src('_logger.exception("toolguard: could not make the span current")')
        src("nested = _inside_set(True) if traj is not None else None")
        src("try:")
        with src.indent():
            src(f"result = {invoke}")
        src("except BaseException as exc:")
        with src.indent():
            src("_leave(token, nested)")
            src(
                f"rejection = _fail(guard, owner, {call_id}, traj, step, span, recording, "
                "values, exc)"
            )
            if dispatch:
                src("if isinstance(exc, Exception):")
                with src.indent():
                    src("return rejection")
            src("raise")
        src("if token is not None:")
        with src.indent():
            src("try:")  # telemetry.detach, inline
            with src.indent():
                src("_otel_detach(token)")
            src("except Exception:")
            with src.indent():
                src('_logger.exception("toolguard: could not restore the previous context")')
        src("if nested is not None:")
        with src.indent():
            src("try:")
            with src.indent():
                src("_inside_reset(nested)")
            src("except ValueError:  # left in another context")
            with src.indent():
                src("_inside_set(False)")
    if in_pending:
        # Dropped by an exception out of here, the PendingCall is cancelled when collected.
        _emit_post(src, tool)
        _emit_close(src, call_id, in_pending)
    else:
        src("failures = None")
        src("try:")
        with src.indent():
            _emit_post(src, tool)
        src("except BaseException:")
        with src.indent():
            # What the general path's PendingCall does when such an exception leaves
            # finish(): dropped unclosed, it is cancelled with its failures so far.
            src(f"_abandon(guard, owner, {call_id}, traj, step, span, recording, values, failures)")
            src("raise")
        _emit_close(src, call_id, in_pending)
    src("return result")


def _emit_make_direct(src: _Source, tool: Tool) -> None:
    """The wrapt wrapper of a function called directly: its result, or ToolCallRejected."""
    src("def make_direct(GUARD, FIXED, general, proceed):")
    with src.indent():
        src("def direct(wrapped, instance, args, kwargs):")
        with src.indent():
            fallback = "return general(wrapped, instance, args, kwargs)"
            src("traj = _current_get()")
            src("if traj is not None:")
            with src.indent():
                src("if traj.ended or _inside_get():")
                with src.indent():
                    src(fallback)
            src("elif _open[0]:")
            with src.indent():
                src(fallback)
            _emit_prologue(src, fallback)
            src("owner = FIXED if FIXED is not None else instance")
            _emit_step(src, None)
            _emit_span(
                src,
                "None",
                "return proceed(_PendingCall(guard, NAME, TOOL, owner, None, traj, None, step), "
                "wrapped, args, kwargs)",
            )
            src("raw = None")
            src("try:")
            with src.indent():
                src("failure = None")
                src("if args:")
                with src.indent():
                    src("try:")
                    with src.indent():
                        src("raw = TOOL.bind(args, kwargs)")
                    src("except TypeError as exc:")
                    with src.indent():
                        src("failure = _bind_failure(TOOL, exc)")
                        src("raw = {}")
                src("else:")
                with src.indent():
                    src("raw = kwargs")
                src("if failure is None:")
                with src.indent():
                    _emit_checks(src, tool)
                src("else:")
                with src.indent():
                    src("values = raw")
            src("except BaseException:")
            with src.indent():
                src("_cancel(guard, owner, None, traj, step, span, recording, raw)")
                src("raise")
            src("if failure is not None:")
            with src.indent():
                src(
                    "rejection = _blocked(guard, owner, None, traj, step, span, recording, "
                    "values, failure)"
                )
                if tool.is_async:
                    src("return _raise_async(rejection)")
                else:
                    src("raise _ToolCallRejected(rejection)")
            if tool.is_async:
                src(
                    "return run(_made(guard, TOOL, owner, None, traj, step, span, recording, "
                    "values), wrapped)"
                )
            else:
                _emit_run(src, tool, "None", "wrapped", dispatch=False)
        if tool.is_async:
            src("async def run(pending, wrapped):")
            with src.indent():
                _emit_run(src, tool, "None", "wrapped", dispatch=False)
        src("return direct")
    src("")


def _emit_make_dispatch(src: _Source, tool: Tool) -> None:
    """guard.call / acall by name: the result, or the Rejection (also when the tool raised)."""
    src("def make_dispatch(GUARD, FN, OWNER, general, proceed):")
    with src.indent():
        src("def dispatch(arguments, call_id, trajectory, step):")
        with src.indent():
            fallback = "return general(arguments, call_id, trajectory, step)"
            src("traj = trajectory")
            src("if traj is None:")
            with src.indent():
                src("traj = _current_get()")
                src("if traj is None:")
                with src.indent():
                    src("if _open[0]:")
                    with src.indent():
                        src(fallback)
                src("elif _inside_get():")
                with src.indent():
                    src(fallback)
            src("if traj is not None and traj.ended:")
            with src.indent():
                src(fallback)
            _emit_prologue(src, fallback)
            src("owner = OWNER")
            _emit_step(src, "call_id")
            _emit_span(
                src,
                "call_id",
                "return proceed(_PendingCall(guard, NAME, TOOL, owner, call_id, traj, None, "
                "step), arguments)",
            )
            src("raw = None")
            src("try:")
            with src.indent():
                src("failure = None")
                src("if type(arguments) is dict:")
                with src.indent():
                    src("raw = dict(arguments)")
                src("else:")
                with src.indent():
                    src("try:")
                    with src.indent():
                        src("raw = _parse_arguments(NAME, arguments)")
                    src("except _SchemaFailure as exc:")
                    with src.indent():
                        src("failure = exc.failure")
                        src("raw = {}")
                src("if failure is None:")
                with src.indent():
                    _emit_checks(src, tool)
                src("else:")
                with src.indent():
                    src("values = raw")
            src("except BaseException:")
            with src.indent():
                src("_cancel(guard, owner, call_id, traj, step, span, recording, raw)")
                src("raise")
            src("if failure is not None:")
            with src.indent():
                src(
                    "rejection = _blocked(guard, owner, call_id, traj, step, span, recording, "
                    "values, failure)"
                )
                src("return _value(rejection)" if tool.is_async else "return rejection")
            if tool.is_async:
                src(
                    "return run(_made(guard, TOOL, owner, call_id, traj, step, span, recording, "
                    "values))"
                )
            else:
                _emit_run(src, tool, "call_id", "FN", dispatch=True)
        if tool.is_async:
            src("async def run(pending):")
            with src.indent():
                src("call_id = pending.call_id")
                _emit_run(src, tool, "call_id", "FN", dispatch=True)
        src("return dispatch")
    src("")


def _key_place(find: Callable[..., Any]) -> str | None:
    """The key of a ``produces`` key-name place (a partial of _find_key), else None."""
    if getattr(find, "func", None) is _find_key and not getattr(find, "args", True):
        keywords = getattr(find, "keywords", {})
        if set(keywords) == {"key", "depth"} and keywords["depth"] == 0:
            key = keywords["key"]
            return key if isinstance(key, str) else None
    return None


# -- what the generated code calls --------------------------------------------------------------


def _made(
    guard: Guard,
    tool: Tool,
    owner: Any,
    call_id: str | None,
    traj: Trajectory | None,
    step: int | None,
    span: Any,
    recording: bool,
    arguments: Any,
) -> PendingCall:
    """The PendingCall the general path would hold at this point of the call."""
    pending = PendingCall.__new__(PendingCall)
    pending.guard = guard
    pending.name = tool.name
    pending.tool = tool
    pending.instance = owner
    pending.call_id = call_id
    pending.rejection = None
    pending.decision = None
    pending.sorted_failures = []
    pending.traj = traj
    pending.step = step
    pending.mode = "block"
    pending.failures = []
    pending.arguments = arguments if isinstance(arguments, dict) else {}
    pending.blocked = False
    pending.token = None
    pending.nested = None
    pending.owns_span = True
    pending.span = span
    pending.recording = recording
    return pending


def _binder(tool: Tool) -> dict[str, Callable[..., Any]]:
    """Helpers closing over the tool (bound into each generated module)."""

    def blocked(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
        failure: Failure,
    ) -> Rejection:
        pending = _made(guard, tool, owner, call_id, traj, step, span, recording, values)
        pending.reject(failure)
        assert pending.rejection is not None
        return pending.rejection

    def cancel(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
    ) -> None:
        _made(guard, tool, owner, call_id, traj, step, span, recording, values).cancel()

    def fail(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
        exc: BaseException,
    ) -> Rejection:
        pending = _made(guard, tool, owner, call_id, traj, step, span, recording, values)
        return pending.fail(exc)

    def close_ran(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
        failures: list[Failure],
    ) -> None:
        pending = _made(guard, tool, owner, call_id, traj, step, span, recording, values)
        pending.failures = failures
        pending._close(executed=True)

    def abandon(
        guard: Guard,
        owner: Any,
        call_id: str | None,
        traj: Trajectory | None,
        step: int | None,
        span: Any,
        recording: bool,
        values: Any,
        failures: list[Failure] | None,
    ) -> None:
        pending = _made(guard, tool, owner, call_id, traj, step, span, recording, values)
        pending.failures = list(failures or ())
        if pending.decision is None:
            pending.__del__()  # the warning and the cancel of a dropped call

    return {
        "_abandon": abandon,
        "_blocked": blocked,
        "_cancel": cancel,
        "_fail": fail,
        "_close_ran": close_ran,
    }


def _leave(token: object | None, nested: Any) -> None:
    """PendingCall.leave: the span no longer current, the nested-call mark reset."""
    if token is not None:
        tel.detach(token)
    if nested is not None:
        try:
            _inside_tool.reset(nested)
        except ValueError:  # left in another context (a framework's callback thread)
            _inside_tool.set(False)


async def _raise_async(rejection: Rejection) -> Any:
    raise ToolCallRejected(rejection)


async def _value(value: Any) -> Any:
    return value


def _runtime() -> dict[str, Any]:
    from pydantic import ValidationError

    return {
        "_current_get": _current.get,
        "_inside_get": _inside_tool.get,
        "_inside_set": _inside_tool.set,
        "_inside_reset": _inside_tool.reset,
        "_otel_attach": otel_context.attach,
        "_otel_detach": otel_context.detach,
        "_set_span_in_context": trace.set_span_in_context,
        "_open": _open,
        "_ProxyTracer": ProxyTracer,
        "_NoOpTracer": NoOpTracer,
        "_INVALID_SPAN": INVALID_SPAN,
        "_REUSED": tel.REUSED,
        "_start_call_span": tel.start_call_span,
        "_call_attributes": tel.call_attributes,
        "_VALID_ATTRIBUTES": {contract.VALID: True, contract.DECISION: contract.ALLOWED},
        "_ALLOWED": contract.ALLOWED,
        "_STATE": contract.STATE_CONSISTENCY,
        "_PendingCall": PendingCall,
        "_ToolCallRejected": ToolCallRejected,
        "_SchemaFailure": SchemaFailure,
        "_ValidationError": ValidationError,
        "_COLLECTIONS": _COLLECTIONS,
        "_NO_BINDINGS": _NO_BINDINGS,
        "_ref_failure": ref_failure,
        "_path_failure": path_failure,
        "_condition_error": condition_error,
        "_condition_failure": condition_failure,
        "_is_placeholder": is_placeholder,
        "_grounded_failure": grounded_failure,
        "_bind_failure": bind_failure,
        "_default_error_result": default_error_result,
        "_guard_error": guard_error,
        "_error_result_failure": error_result_failure,
        "_parse_arguments": parse_arguments,
        "_find_key_into": find_key_into,
        "_find_key": _find_key,
        "_LEAVES": _LEAVES,
        "_KEY_CONTAINERS": _KEY_CONTAINERS,
        "_Binding": _Binding,
        "_leave": _leave,
        "_made": _made,
        "_raise_async": _raise_async,
        "_value": _value,
        "_logger": logger,
    }


_RUNTIME = _runtime()
