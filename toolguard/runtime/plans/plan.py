"""Plans: the steps a planner proposes, references between them, and the verdict on a plan.

A plan is a list of steps, each a tool name, its arguments and an optional id. An argument
(or any value nested in one) may be a reference to an earlier step's result instead of a
literal: in Python ``tg.StepRef(step, path)``, in JSON ``{"$step": <index or id>, "path":
"a.b.0"}``. ``step`` is the 0-based index of an earlier step in the plan, or the id of one;
``path`` walks the result from its root: mapping keys and list indexes (``0``, ``-1`` for the
last item) separated by dots, ``""`` (or no path) for the whole result. A mapping whose keys
are ``$step`` and, optionally, ``path`` is always a reference. Nothing in a plan is evaluated
as code: a path is a list of names and numbers, looked up one by one.

plan_check.py checks a plan; this module holds its data and the reference syntax.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..._errors import ToolGuardError, UsageError
from ..tools.conditions import shorten
from ..tools.markers import WHOLE_RESULT, ResultPlace
from ..tools.places import _result_path
from ..verdict import NAME_LIMIT, shorten_text
from . import walk as plan_walk

PLAN_CHECK: Final = "schema.plan"  # the check id of a malformed plan or step
REF_KEY: Final = "$step"
PATH_KEY: Final = "path"
_STEP_KEYS: Final = {"tool": "tool", "name": "tool", "arguments": "arguments", "args": "arguments"}


@dataclass(frozen=True)
class StepRef:
    """In a planned step's arguments: the value at ``path`` in the result of an earlier step
    (``step``: its 0-based index in the plan, or its id). JSON: ``{"$step": 0, "path": "a.0"}``.
    """

    step: int | str
    path: str = ""

    def __post_init__(self) -> None:
        step = self.step
        if isinstance(step, bool) or not isinstance(step, int | str) or step == "":
            raise UsageError(f"StepRef: step must be an index (int) or a step id, not {step!r}")
        if isinstance(step, int) and step < 0:
            raise UsageError(f"StepRef: step must be an index >= 0, not {step}")
        if not isinstance(self.path, str):
            raise UsageError(f"StepRef: path must be a string such as 'a.b.0', not {self.path!r}")

    @property
    def parts(self) -> tuple[str, ...]:
        """The path's segments (``"a.b.0"`` -> ``("a", "b", "0")``)."""
        return tuple(self.path.split(".")) if self.path else ()

    def to_json(self) -> dict[str, Any]:
        return {REF_KEY: self.step, PATH_KEY: self.path} if self.path else {REF_KEY: self.step}

    def __str__(self) -> str:
        return json.dumps(self.to_json())


@dataclass(frozen=True)
class PlanStep:
    """One planned call: ``tool``, its ``arguments`` (which may hold :class:`StepRef` values
    or their JSON form) and an optional ``id`` that later steps may refer to."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": self.tool, "arguments": _to_json(self.arguments)}
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass(frozen=True)
class PlanStepVerdict:
    """What verification found for one step: ``ok``, and when not, the
    ``cause``, the check id, ``message`` for the developer and ``model_message`` for the
    planner (the verdicts' convention: ``tg.Verdict``). ``ran_on_fork``: the step ran on the
    fork. ``unchecked``: the checks that could not be made for this step, and why (a
    precondition on a state only a fork would show, an argument known only once an earlier
    step runs)."""

    index: int
    tool: str
    id: str | None
    valid: bool
    cause: str | None = None
    check: str | None = None
    message: str | None = None
    ran_on_fork: bool = False
    unchecked: tuple[str, ...] = ()
    model_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.valid


@dataclass(frozen=True)
class PlanVerdict:
    """The verdict on a plan. ``ok``: no step would fail. Otherwise
    ``failed`` is the index of the first step that would (None when the plan as a whole is
    malformed or its fork could not be cleaned up), with ``cause``, ``check``, ``message``
    for the developer and ``model_message`` for the planner: what was wrong and how to fix
    it (also ``str(verdict)``). ``steps``: the verdict of every step checked, up to and
    including the failing one. ``dry_run``: steps ran on a fork."""

    steps: tuple[PlanStepVerdict, ...]
    failed: int | None = None
    cause: str | None = None
    check: str | None = None
    message: str | None = None
    dry_run: bool = False
    model_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.cause is None

    def __bool__(self) -> bool:
        # It used to be falsy when a step would fail: refused rather than silently truthy,
        # so that `if not verdict:` written for that meaning says so instead of never firing.
        raise TypeError(
            "a PlanVerdict has no truth value: ask verdict.ok (True when no step would fail)"
        )

    def __str__(self) -> str:
        if self.model_message is not None:
            return self.model_message
        return f"The plan passed verification ({len(self.steps)} steps)."


class PlanError(Exception):
    """Internal: a malformed plan or step, with the planner-facing text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def parse_plan(steps: Any) -> list[PlanStep | PlanError]:
    """The plan's steps (a malformed one as its error). JSON text may be a list of steps or an
    object with a ``"steps"`` list; a step is an object ``{"tool", "arguments", "id"}``
    (``name`` and ``args`` are accepted for ``tool`` and ``arguments``)."""
    if isinstance(steps, str | bytes | bytearray):
        try:
            steps = json.loads(steps)
        except (ValueError, RecursionError) as exc:
            raise PlanError(
                f"The plan is not valid JSON ({exc}). Send a JSON list of steps."
            ) from None
        if isinstance(steps, dict) and set(steps) == {"steps"}:
            steps = steps["steps"]
        if not isinstance(steps, list):
            raise PlanError(
                'The plan must be a JSON list of steps such as [{"tool": "...", "arguments": '
                f"{{...}}}}], not {shorten(steps)}."
            )
    elif isinstance(steps, Mapping) or not isinstance(steps, Sequence):
        raise UsageError(
            "verify_plan() takes a sequence of tg.PlanStep (or step mappings) or the plan's "
            f"JSON text, not {type(steps).__name__}"
        )
    return [_parse_step(i, item) for i, item in enumerate(steps)]


def _parse_step(index: int, item: Any) -> PlanStep | PlanError:
    if isinstance(item, PlanStep):
        step = item
    elif isinstance(item, Mapping):
        fields: dict[str, Any] = {}
        for key, value in item.items():
            name = "id" if key == "id" else _STEP_KEYS.get(key)
            if name is None:
                return PlanError(
                    f"steps[{index}] has an unknown key {shorten(key)}: a step has `tool`, "
                    "`arguments` and optionally `id`."
                )
            if name in fields:
                return PlanError(f"steps[{index}] names its {name} twice.")
            fields[name] = value
        if "tool" not in fields:
            return PlanError(f'steps[{index}] has no `tool`: write {{"tool": "name", ...}}.')
        arguments = fields.get("arguments", {})
        if isinstance(arguments, str):  # arguments as JSON text, the way models send them
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError) as exc:
                return PlanError(f"steps[{index}]: the arguments are not valid JSON ({exc}).")
        step = PlanStep(fields["tool"], arguments, fields.get("id"))
    else:
        return PlanError(f"steps[{index}] is {shorten(item)}, not a step object.")
    if not isinstance(step.tool, str) or not step.tool:
        return PlanError(f"steps[{index}]: `tool` must be a tool name, not {shorten(step.tool)}.")
    if not isinstance(step.arguments, Mapping):
        return PlanError(
            f"steps[{index}]: `arguments` must be an object of named arguments, not "
            f"{shorten(step.arguments)}."
        )
    if step.id is not None and (not isinstance(step.id, str) or not step.id):
        return PlanError(
            f"steps[{index}]: `id` must be a non-empty string, not {shorten(step.id)}."
        )
    return step


def read_refs(value: Any, where: str) -> Any:
    """``value`` with each reference in JSON form turned into a :class:`StepRef`; a malformed
    reference raises :class:`PlanError` naming ``where`` (the argument)."""

    def visit(node: Any, chain: plan_walk.Chain) -> Any:
        if not isinstance(node, Mapping) or REF_KEY not in node:
            return plan_walk.DESCEND
        at = _dotted(where, plan_walk.place_of(chain))
        extra = set(node) - {REF_KEY, PATH_KEY}
        if extra:
            raise PlanError(
                f"`{at}` holds a reference with unknown keys "
                f"{', '.join(sorted(map(str, extra)))}: a reference is "
                '{"$step": <index or id>, "path": "a.b.0"}.'
            )
        try:
            path = node.get(PATH_KEY, "")  # a path of 0 or false is a mistake, not "all"
            return StepRef(node[REF_KEY], "" if path is None else path)
        except UsageError as exc:
            raise PlanError(
                f"`{at}` holds a malformed reference: {shorten_text(str(exc))}."
            ) from None

    try:
        return plan_walk.rebuild(value, visit)
    except plan_walk.Cyclic as exc:
        raise PlanError(
            f"`{_dotted(where, exc.place)}` holds itself: arguments must be a tree of values."
        ) from None


def _dotted(where: str, place: tuple[Any, ...]) -> str:
    return shorten_text(".".join([where, *map(str, place)]), NAME_LIMIT)


def refs_in(value: Any, place: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], StepRef]]:
    """Every reference inside ``value`` with its place (keys and indexes from the root)."""
    for at, ref in plan_walk.find(value, StepRef):
        yield (*place, *at), ref


def replace_refs(value: Any, known: Mapping[StepRef, Any]) -> Any:
    """``value`` with each reference in ``known`` replaced by its value; others stay."""

    def visit(node: Any, chain: plan_walk.Chain) -> Any:
        return known.get(node, node) if isinstance(node, StepRef) else plan_walk.DESCEND

    return plan_walk.rebuild(value, visit)


class Unresolvable(Exception):
    """Internal: a path that does not lead anywhere in a result; the text says why."""


class PlanRefError(ToolGuardError, ValueError):
    """A reference in a planned step's arguments that is malformed, or that names nothing in
    the results it is resolved against (no result of its step, or a path the result does not
    have); the message names the argument, the reference and what the result has instead."""


def plan_refs(arguments: Mapping[str, Any]) -> list[StepRef]:
    """The references in a planned step's ``arguments``, at any depth and in order, each a
    :class:`StepRef` (whether written as one or in JSON form). A malformed reference raises
    :class:`PlanRefError`. The steps a step depends on: ``{ref.step for ref in ...}``."""
    return [ref for _, ref in refs_in(_read("arguments", arguments))]


def resolve_plan_refs(
    arguments: Mapping[str, Any], results: Sequence[Any] | Mapping[int | str, Any]
) -> dict[str, Any]:
    """``arguments`` with each reference replaced by the value at its path in the real
    result of the step it names: what to call a verified plan's step with once the earlier
    steps ran. ``results``: the earlier steps' results by index (a list), or a mapping keyed
    by the index or the id the references use. Values are looked up as ``verify_plan`` does,
    never evaluated; a reference that names nothing raises :class:`PlanRefError`."""
    args = _read("arguments", arguments)
    known: dict[StepRef, Any] = {}
    for place, ref in refs_in(args):
        at = _dotted("arguments", place)
        try:
            if isinstance(results, Mapping):
                result = results[ref.step]
            elif isinstance(ref.step, str):
                raise PlanRefError(
                    f"`{at}` holds {ref}, which names a step by id: pass the results as a "
                    "mapping keyed by step id"
                )
            else:
                result = results[ref.step]
        except (KeyError, IndexError):
            raise PlanRefError(f"`{at}` holds {ref}, but step {ref.step!r} has no result") from None
        try:
            known[ref] = resolve(result, ref.parts)
        except Unresolvable as exc:
            raise PlanRefError(f"`{at}` holds {ref}, which names nothing: {exc}") from None
    resolved: dict[str, Any] = replace_refs(args, known)
    return resolved


def _read(where: str, arguments: Mapping[str, Any]) -> Any:
    if not isinstance(arguments, Mapping):
        raise UsageError(
            f"a step's arguments are a mapping of named arguments, not {type(arguments).__name__}"
        )
    try:
        return read_refs(dict(arguments), where)
    except PlanError as exc:
        raise PlanRefError(exc.message) from None


def resolve(result: Any, parts: tuple[str, ...]) -> Any:
    """The value at ``parts`` in ``result``: keys of mappings, indexes of lists, public
    attributes of objects (a pydantic model, a dataclass). Looked up, never evaluated."""
    value = result
    for depth, part in enumerate(parts):
        at = ".".join(parts[:depth]) or "the result"
        if isinstance(value, Mapping):
            if part in value:
                value = value[part]
            elif (key := _as_int(part)) is not None and key in value:
                value = value[key]
            else:
                keys = ", ".join(shorten(k) for k in list(value)[:8])
                raise Unresolvable(f"{at} has no key {part!r} (its keys: {keys or 'none'})")
        elif isinstance(value, list | tuple):
            if not _is_int(part):
                raise Unresolvable(f"{at} is a list: {part!r} is no index")
            index = _as_int(part)
            if index is None or not -len(value) <= index < len(value):
                item = shorten(part) if index is None else index
                raise Unresolvable(f"{at} is a list of {len(value)} items: no item {item}")
            value = value[index]
        elif not part.startswith("_") and _has_field(value, part):
            value = getattr(value, part)
        else:
            raise Unresolvable(f"{at} is a {type(value).__name__}, which has no {part!r}")
    return value


def reaches(place: ResultPlace, parts: tuple[str, ...]) -> bool:
    """Whether a reference's path can lead to a value a tool produces at ``place`` (a
    ``produces`` key): list indexes stand for ``[]``; a callable place may lead anywhere."""
    if not isinstance(place, str):
        return True
    shape = tuple("[]" if _is_int(p) else p for p in parts)
    if place == WHOLE_RESULT:
        return shape == ()
    if "." in place or "[]" in place:
        return shape == _result_path(place)
    # A key name is found at any depth, also as the items of a list held under it.
    return bool(shape) and (
        shape[-1] == place or (len(shape) > 1 and shape[-1] == "[]" and shape[-2] == place)
    )


def suggest_path(place: ResultPlace, parts: tuple[str, ...]) -> str:
    """A path that reaches ``place``, as close to ``parts`` as a guess can be."""
    if not isinstance(place, str) or place == WHOLE_RESULT:
        return ""
    if "." in place or "[]" in place:
        return ".".join("0" if p == "[]" else p for p in _result_path(place))
    kept = parts[:-1] if parts and not _is_int(parts[-1]) else parts
    return ".".join((*kept, place))


def _has_field(value: Any, name: str) -> bool:
    fields = getattr(type(value), "model_fields", None) or getattr(
        value, "__dataclass_fields__", None
    )
    return isinstance(fields, Mapping) and name in fields


def _is_int(text: str) -> bool:
    # ASCII digits only: str.isdigit() also takes "²" and other digits int() refuses.
    digits = text[1:] if text.startswith("-") else text
    return bool(digits) and digits.isascii() and digits.isdigit()


# Longer numbers are no index of any list (and int() refuses text past ~4300 digits).
_INDEX_DIGITS: Final = 30


def _as_int(text: str) -> int | None:
    """``text`` as an index or int key, or None when it is none (or too long to be one)."""
    if not _is_int(text) or len(text) > _INDEX_DIGITS:
        return None
    return int(text)


def _to_json(value: Any) -> Any:
    def visit(node: Any, chain: plan_walk.Chain) -> Any:
        return node.to_json() if isinstance(node, StepRef) else plan_walk.DESCEND

    return plan_walk.rebuild(value, visit)
