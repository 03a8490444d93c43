"""The generated source's builder and the check emitters of :mod:`compiled`: schema,
references, conditions, grounded arguments, the result's checks and ``produces``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _contract as contract
from .conditions import _Condition
from .tool import Tool, _find_key

if TYPE_CHECKING:
    pass


class Source:
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
    def __init__(self, src: Source) -> None:
        self.src = src

    def __enter__(self) -> None:
        self.src.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.src.depth -= 1


def _emit_schema(src: Source, tool: Tool) -> None:
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


def _emit_refs(src: Source, tool: Tool) -> None:
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
    src: Source, condition: _Condition, index: int, prefix: str, post: bool, on_fail: str
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


def _emit_preconditions(src: Source, tool: Tool) -> None:
    for i, condition in enumerate(tool.preconditions):
        src("if failure is None:")
        with src.indent():
            _emit_condition(src, condition, i, "precondition", False, "failure = {failure}")


def _emit_grounded(src: Source, tool: Tool) -> None:
    """The information check (check_grounded), one block per grounded argument."""
    for arg in tool.grounded:
        src(f"if failure is None and {arg!r} in values:")
        with src.indent():
            src(f"value = values[{arg!r}]")
            src("placeholder = _ungrounded(traj, value)")
            src("if placeholder is not None:")
            with src.indent():
                src(f"failure = _grounded_failure({arg!r}, value, placeholder)")


def emit_checks(src: Source, tool: Tool) -> None:
    """From ``raw`` to ``values`` and ``failure`` (None: admitted), block mode."""
    src("failure = None")
    _emit_schema(src, tool)
    _emit_refs(src, tool)
    _emit_preconditions(src, tool)
    _emit_grounded(src, tool)


def emit_run_checks(src: Source, tool: Tool) -> None:
    """PendingCall.run_checks for a block-mode call without content recording."""
    src("def run_checks(pending, raw):")
    with src.indent():
        src("guard = pending.guard")
        src("traj = pending.traj")
        src("owner = pending.instance")
        emit_checks(src, tool)
        src("pending.arguments = values")
        src("if failure is not None:")
        with src.indent():
            src("pending.reject(failure)")
    src("")


def emit_post(src: Source, tool: Tool) -> None:
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


def _emit_find_key(src: Source, key: str, kind: str) -> None:
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
        src("elif type(result) is list:")
        with src.indent():
            # A list of records (a search's answer): each flat record is looked up as the
            # flat dict above; a record holding a container is walked whole. The loop over
            # a record's values is inline: cheaper than issuperset's temporary set per record.
            src("for item in result:")
            with src.indent():
                src("if type(item) is dict:")
                with src.indent():
                    src("for v in item.values():")
                    with src.indent():
                        src("if type(v) not in _LEAVES:")
                        with src.indent():
                            src(f"_find_key_into(item, {key!r}, found, 1)")
                            src("break")
                    src("else:")
                    with src.indent():
                        src(f"if {key!r} in item:")
                        with src.indent():
                            src(f"found.append(item[{key!r}])")
                src("elif type(item) not in _LEAVES:")
                with src.indent():
                    src(f"_find_key_into(item, {key!r}, found, 1)")
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
            # A leaf of a built-in type is hashable: only other values pay the hash probe.
            src("if type(value) not in _LEAVES:")
            with src.indent():
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
                # Every value this call produces has the same binding: one object, shared
                # (bindings are immutable; invalidation replaces a value's binding).
                src("binding = _Binding(True, NAME, step, None, True)")
            src("known[value] = binding")


def _key_place(find: Callable[..., Any]) -> str | None:
    """The key of a ``produces`` key-name place (a partial of _find_key), else None."""
    if getattr(find, "func", None) is _find_key and not getattr(find, "args", True):
        keywords = getattr(find, "keywords", {})
        if set(keywords) == {"key", "depth"} and keywords["depth"] == 0:
            key = keywords["key"]
            return key if isinstance(key, str) else None
    return None
