"""The checks of one planned step, for ``guard.verify_plan`` (plan_run.py drives them).

Each step is checked in the protocol's order, as a call would be: schema (with a reference's
place left to the reference checks), dependency (symbolically: a :class:`StepRef` to an
earlier step whose tool produces the kind a ``Ref`` asks for, at a place its path can reach;
a literal against the trajectory's bound values; with a fork, the real value the reference
resolves to), precondition, information. What cannot be known is said, not guessed
(``PlanStepVerdict.unchecked``): without a fork, a precondition that reads the state is
checked for the first step only (later steps meet a state the earlier ones changed), and a
reference is known only by its kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import INVALID_SPAN, Span

from ... import _contract as contract
from ..._errors import UsageError
from ..checks.conditions import check_conditions
from ..checks.information import grounded_failure, is_placeholder
from ..forks import strategies as _fork
from ..forks.strategies import ForkStrategy
from ..tools.conditions import shorten
from ..tools.places import resolve_path
from ..tools.schema import SchemaFailure
from ..tools.tool import Tool
from ..trajectories.bindings import Bindings
from ..trajectories.current import current_trajectory
from ..trajectories.trajectory import Trajectory
from ..verdict import Failure, shorten_text
from .failures import (
    dependency_failure,
    hashable,
    place_text,
    producers,
    ref_text,
)
from .plan import (
    PlanError,
    PlanStep,
    PlanStepVerdict,
    StepRef,
    Unresolvable,
    parse_plan,
    reaches,
    refs_in,
    replace_refs,
    resolve,
    suggest_path,
)

if TYPE_CHECKING:
    from ..guard import Guard

_STATE_NAMES = frozenset({"state", "guard_state", "instance"})


class _Fork:
    __slots__ = ("forked", "strategy", "target", "view")

    def __init__(self, strategy: ForkStrategy, target: Any, forked: Any) -> None:
        self.strategy, self.target, self.forked = strategy, target, forked
        # What the plan's later steps see of `target`: the copy, or (in place) the object.
        self.view = target if _fork.is_in_place(strategy) else forked


class StepChecks:
    """The state of one verification and the checks of its steps."""

    def __init__(
        self,
        guard: Guard,
        steps: Any,
        trajectory: Trajectory | None,
        dry_run: Any,
        is_async: bool,
    ) -> None:
        if trajectory is not None and not isinstance(trajectory, Trajectory):
            raise UsageError(f"trajectory must be a Trajectory, got {type(trajectory).__name__}")
        self.guard = guard
        self.mode = _fork.resolve(dry_run, "verify_plan", inherits=True)
        self.is_async = is_async
        self.traj = trajectory if trajectory is not None else current_trajectory()
        if self.traj is not None and self.traj.ended:
            self.traj = None
        self.plan_error: PlanError | None = None
        self.steps: list[PlanStep | PlanError] = []
        try:
            self.steps = parse_plan(steps)
        except PlanError as exc:
            self.plan_error = exc
        # The fork has followed every step so far (None, like False, forks nothing).
        self.live = self.mode is not False and self.mode is not None
        self.ran_any = False
        self.forks: dict[int, _Fork] = {}  # by id() of the object forked
        self.results: dict[int, Any] = {}
        # What the steps that ran on the fork produced: the trajectory's own binding type.
        self.produced = Bindings()
        self.stale: dict[tuple[str, Any], int] = {}  # (kind, value or ref key) -> step
        self.seen: set[str] = set()  # leaves of the fork's results
        self.ids: dict[str, int] = {}
        self.verdicts: list[PlanStepVerdict] = []
        self.failed: int | None = None
        self.failure: Failure | None = None
        self.span: Span = INVALID_SPAN  # plan_run.py's spans
        self.step_span: Span = INVALID_SPAN
        # The step being checked.
        self.notes: list[str] = []
        self.ran = False
        self.resolved: dict[StepRef, Any] = {}

    # -- the checks ----------------------------------------------------------------------------
    def _targets(self, i: int, refs: list[tuple[tuple[Any, ...], StepRef]]) -> Failure | None:
        for place, ref in refs:
            j = ref.step if isinstance(ref.step, int) else self.ids.get(ref.step)
            if j is not None and j < i:
                continue
            where = place_text(place)
            if j == i:
                why = "this step itself"
            elif isinstance(ref.step, int):
                why = "a later step" if ref.step < len(self.steps) else "no step of the plan"
            elif any(isinstance(s, PlanStep) and s.id == ref.step for s in self.steps[i:]):
                why = "a later step"
            else:
                why = "the id of no step"
            text = (
                f"`{where}` refers to {ref_text(ref)}, which is {why}: a step can only use the "
                f"results of the steps before it (steps[0] to steps[{i - 1}])"
                if i
                else f"`{where}` refers to {ref_text(ref)}, but the first step has no earlier step "
                "to use"
            )
            return dependency_failure(where, text + ".", f"{where} refers to no earlier step")
        return None

    def _index(self, ref: StepRef) -> int:
        return ref.step if isinstance(ref.step, int) else self.ids[ref.step]

    def _resolve(self, i: int, refs: list[tuple[tuple[Any, ...], StepRef]]) -> Failure | None:
        """References to steps that ran on the fork, resolved from their real results."""
        for place, ref in refs:
            j = self._index(ref)
            if j not in self.results:
                continue
            try:
                self.resolved[ref] = resolve(self.results[j], ref.parts)
            except Unresolvable as exc:
                where = place_text(place)
                return dependency_failure(
                    where,
                    f"`{where}` refers to {ref_text(ref)}, a path that steps[{j}]'s result (run on "
                    f"a copy of the state) does not have: {shorten_text(str(exc), 300)}. Fix the "
                    "path.",
                    f"{where} refers to a path steps[{j}]'s result does not have",
                )
        return None

    def _schema(
        self,
        tool: Tool,
        args: dict[str, Any],
        symbolic: set[Any],
        refs: list[tuple[tuple[Any, ...], StepRef]],
    ) -> tuple[dict[str, Any], Failure | None]:
        if not symbolic:
            try:
                return tool.schema.validate(args), None
            except SchemaFailure as exc:
                return args, exc.failure
        locate = tool.schema.locate
        if locate is None:
            self.notes.append("schema: checked once the references are known")
            return args, None
        # A reference's value is unknown: its place holds null, and what is said there waits.
        places = [place for place, ref in refs if ref not in self.resolved]
        problems = [
            (where, text)
            for where, text in locate(
                replace_refs(args, dict.fromkeys(_unresolved(refs, self.resolved)))
            )
            if where and not any(where[: len(p)] == p for p in places)
        ]
        if not problems:
            return args, None
        listing = "; ".join(f"{place_text(w)}: {t}" for w, t in problems[:4])
        return args, Failure(
            contract.SCHEMA,
            "schema.args",
            f"invalid arguments for {tool.name!r}: {listing}",
            f"The arguments for `{tool.name}` are invalid: {listing}. Use arguments matching "
            f"{tool.schema.hint}.",
            telemetry_message=f"invalid arguments for {tool.name!r} at "
            + ", ".join(place_text(w) for w, _ in problems[:4]),
        )

    def _dependencies(self, i: int, tool: Tool, values: Mapping[str, Any]) -> Failure | None:
        for arg, kind in tool.refs.items():
            value = values.get(arg)
            items = value if isinstance(value, list | tuple | set | frozenset) else (value,)
            for item in items:
                if item is not None:
                    failure = self._reference(i, arg, kind, item)
                    if failure is not None:
                        return failure
        for label, root, parts, kind in tool.ref_paths:
            for item in resolve_path(values.get(root), parts):
                failure = self._reference(i, label, kind, item)
                if failure is not None:
                    return failure
        return None

    def _reference(self, i: int, arg: str, kind: str, value: Any) -> Failure | None:
        if isinstance(value, StepRef):
            return self._symbolic(arg, kind, value)
        via = next((ref for ref, v in self.resolved.items() if _same(v, value)), None)
        key = hashable(value)
        made = self.produced.lookup(kind, value) if key is not None else None
        if made is not None and made.live:
            return None
        by = self.stale.get((kind, ("value", key)))
        binding = self.traj.lookup(kind, value) if self.traj is not None else None
        if binding is not None and binding.live and by is None:
            return None
        shown = shorten(value)
        if by is not None or binding is not None:
            who = f"steps[{by}] (`{self._tool_name(by)}`)" if by is not None else None
            who = who or (binding.invalidated_by if binding else None) or "an earlier call"
            return dependency_failure(
                arg,
                f"`{arg}` = {shown} is a stale {kind}: {who} invalidates it before this step.",
                f"{arg} is a stale {kind}",
            )
        if via is None and self.traj is None:
            return None  # as a call outside any trajectory: nothing to check a literal against
        if via is not None:
            j = self._index(via)
            return dependency_failure(
                arg,
                f"`{arg}` refers to {ref_text(via)}, which holds {shown} in steps[{j}]'s result "
                f"(run on a copy of the state): no {kind} that `{self._tool_name(j)}` returned. "
                f"Point the path at a {kind}.",
                f"{arg} refers to a value that is no {kind}",
            )
        return dependency_failure(
            arg,
            f"`{arg}` = {shown} is no {kind} known so far. {self._offer(kind)}",
            f"{arg} is no {kind} known so far",
        )

    def _symbolic(self, arg: str, kind: str, ref: StepRef) -> Failure | None:
        j = self._index(ref)
        tool = self.guard._tools[self._tool_name(j)][0]
        by = self.stale.get((kind, ("ref", j, ref.path)))
        if by is not None:
            return dependency_failure(
                arg,
                f"`{arg}` refers to {ref_text(ref)}, a {kind} that steps[{by}] "
                f"(`{self._tool_name(by)}`) invalidates before this step.",
                f"{arg} refers to a stale {kind}",
            )
        places = [place for place, k in tool.spec.produces.items() if k == kind]
        if not places:
            return dependency_failure(
                arg,
                f"`{arg}` needs a {kind}, but it refers to steps[{j}] (`{tool.name}`), which "
                f"returns no {kind}. {self._offer(kind)}",
                f"{arg} refers to a step that returns no {kind}",
            )
        if any(reaches(place, ref.parts) for place in places):
            return None
        fixed = StepRef(ref.step, suggest_path(places[0], ref.parts))
        return dependency_failure(
            arg,
            f"`{arg}` refers to {ref_text(ref)}, but `{tool.name}` returns its {kind} elsewhere "
            f"({', '.join(repr(p) for p in places if isinstance(p, str))}): refer to it as "
            f"{ref_text(fixed)}.",
            f"{arg} refers to a path where steps[{j}] returns no {kind}",
        )

    def _offer(self, kind: str) -> str:
        known = self.traj.live_values(kind, shown_only=True)[:8] if self.traj else []
        names = producers(self.guard, kind)
        parts = []
        if known:
            parts.append(f"Known {kind} values: {', '.join(shorten(v) for v in known)}.")
        if names:
            parts.append(
                f"{'Or r' if known else 'R'}efer to the result of an earlier step that returns "
                f'one ({", ".join(names)}): {{"$step": <index or id>, "path": "..."}}.'
            )
        return " ".join(parts) or f"No tool here returns a {kind}."

    def _preconditions(
        self, i: int, tool: Tool, wrapper: Any, values: Mapping[str, Any], symbolic: set[Any]
    ) -> Failure | None:
        if not tool.preconditions:
            return None
        instance = wrapper._self_bound_to if wrapper is not None else None
        # The state this step would meet: the real one before the first step; after that,
        # only the fork knows it (objects the plan has not forked are as they are now).
        state_known = i == 0 or (self.live and self.ran_any)
        context = {"state": self._view(self.guard.state), "instance": self._view(instance)}
        for condition in tool.preconditions:
            asked = set(condition._params)
            waiting = sorted(asked & symbolic) or (sorted(symbolic) if "args" in asked else [])
            if waiting:
                self.notes.append(
                    f"precondition {condition.id}: {', '.join(waiting)} known only once the "
                    "step it refers to runs"
                )
                continue
            if asked & _STATE_NAMES and not state_known:
                self.notes.append(
                    f"precondition {condition.id}: reads the state, which earlier steps change "
                    "(verify with a fork to check it)"
                )
                continue
            found = check_conditions(
                (condition,),
                "precondition",
                contract.PRECONDITION,
                context,
                values,
                self.guard.fail_open,
                True,
                record_content=self.guard.record_content,
            )
            if found:
                return found[0]
        return None

    def _view(self, obj: Any) -> Any:
        for entry in self.forks.values():
            if entry.target is obj:
                return entry.view
        return obj

    def _information(self, tool: Tool, values: Mapping[str, Any]) -> Failure | None:
        for arg in tool.grounded:
            value = values.get(arg)
            if arg not in values or isinstance(value, StepRef) or any(refs_in(value)):
                continue
            placeholder = is_placeholder(value if isinstance(value, str) else str(value))
            if placeholder or (
                self.traj is not None
                and not self.traj.has_seen(value)
                and str(value) not in self.seen
            ):
                return grounded_failure(arg, value, placeholder)
        return None

    def _invalidate(self, i: int, tool: Tool, values: Mapping[str, Any]) -> None:
        for arg, kind in tool.invalidates.items():
            value = values.get(arg)
            for item in value if isinstance(value, list | tuple) else (value,):
                if isinstance(item, StepRef):
                    self.stale[(kind, ("ref", self._index(item), item.path))] = i
                    continue
                key = hashable(item)
                if key is not None:
                    self.stale[(kind, ("value", key))] = i
                    self.produced.invalidate(kind, key, f"steps[{i}]")

    # -- helpers -------------------------------------------------------------------------------
    def _tool_name(self, j: int) -> str:
        item = self.steps[j]
        return item.tool if isinstance(item, PlanStep) else "?"


def _unresolved(
    refs: list[tuple[tuple[Any, ...], StepRef]], resolved: Mapping[StepRef, Any]
) -> list[StepRef]:
    return [ref for _, ref in refs if ref not in resolved]


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False
