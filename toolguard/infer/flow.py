"""Value flow: for every scalar leaf of every accepted call's arguments, where the value had
appeared before the call in the same trajectory.

Sources, as the guard would read them in a replay with a contract: a place in an earlier
accepted call's result (the ``produces`` places that would have bound it), a value the user
gave (``replay.given.user_values``, which a replay binds under every kind), the user's or
system's text (substring), an earlier call's arguments, or nowhere. A call counts only when
the environment accepted it (its answer is no error); calls run on the run's live
environment where it has one (BFCL's backends), in order, as the replay runs them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..replay.given import user_values
from ..replay.model import Answer, LiveEnvironment, RecordedRun, Said
from ..runtime.checks.information import is_placeholder
from ..runtime.initial_state import candidate_places
from ..runtime.trajectories.leaves import add_leaves
from .domains import Domain
from .evidence import MAX_COUNTEREXAMPLES, Tally, keep_smallest
from .holders import Holder, hold
from .lifetime import After, Lifetimes
from .values import (
    INITIAL,
    MAX_INITIAL_PLACES,
    CommonRule,
    argument_leaves,
    initial_leaves,
    key_place,
    named_id,
    result_leaves,
    value_key,
)

Place = tuple[str, str]  # (producer tool, place in its result)
S = TypeVar("S", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Leaf:
    """Where the value of one argument leaf of an accepted call had appeared: the leaf's
    signature, without its run or value (``evidence.Tally`` counts leaves by it, and keeps
    the value's ``values.value_key`` for the distinct values)."""

    common: bool
    producers: frozenset[Place]
    user_given: bool  # a value the replay binds under every kind
    said: bool  # found in the user's or system's text
    seen: bool  # what the information check would find (text or an earlier result)
    in_arguments: bool  # an earlier call's argument held it
    top: bool  # the argument is this scalar itself
    placeholder: bool
    fraction: bool = False  # a number written with a decimal point (a quantity, not an id)
    # The call introduced the value (nothing before it held it: no result, no initial state,
    # no earlier argument) and a later accepted call named it again: the name of something
    # this call made (a file `touch` created, then written by `echo`).
    creates: bool = False


@dataclass
class ToolCount:
    calls: int = 0
    accepted: int = 0
    answered: int = 0


@dataclass
class Flow:
    """What tracing the runs found: leaves by (tool, argument path), the later life of the
    bound values accepted calls used (``lifetime.py``), both tallied by signature as each
    run ends (``evidence.py``: memory follows the tools' structure, not the number of runs),
    what top-level arguments took (``domains.py``), per-tool counts, how many runs were read
    and warnings."""

    leaves: dict[tuple[str, str], Tally[Leaf]] = field(default_factory=dict)
    after: dict[tuple[str, str], Tally[After]] = field(default_factory=dict)
    # --show-values only: the smallest reprs of each path's values (render names three).
    examples: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    domains: dict[tuple[str, str], Domain] = field(default_factory=dict)
    # One object per distinct producer set: most leaves share a handful of them, and a
    # frozenset each would be most of the memory of 10,000 runs.
    shared: dict[frozenset[Place], frozenset[Place]] = field(default_factory=dict, repr=False)
    tools: dict[str, ToolCount] = field(default_factory=dict)
    # What each producer place held, run by run (``holders.py``: the place closure).
    holders: dict[Place, Holder] = field(default_factory=dict, repr=False)
    runs: int = 0  # trajectories read
    files: int = 0
    warnings: list[str] = field(default_factory=list)
    # Runs whose initial state was too large to trace (``max_initial_places``): how many, the
    # first one's id and its size, said once by ``warn_empty``.
    initial_skipped: int = 0
    initial_skipped_first: tuple[str, int, int] | None = None

    def warn_empty(self) -> None:
        """Say why nothing could be inferred, per tool, and which runs' initial state was
        not traced."""
        if not self.runs:
            self.warnings.append("no recorded run was read: nothing to infer from")
        if self.initial_skipped_first is not None:
            run_id, places, limit = self.initial_skipped_first
            self.warnings.append(
                f"{self.initial_skipped} run(s) carry an initial state too large to trace as a "
                f"source (the first, {run_id!r}: {places} mapping places, more than "
                f"--max-initial-places {limit}): their [initial] values explain nothing"
            )
        for name in sorted(self.tools):
            count = self.tools[name]
            if count.answered == 0:
                self.warnings.append(
                    f"tool {name!r}: {count.calls} call(s) with no recorded result: nothing "
                    "can be inferred for it"
                )
            elif count.accepted == 0:
                self.warnings.append(
                    f"tool {name!r}: no call the environment accepted ({count.calls} "
                    "call(s)): nothing can be inferred for it"
                )


def trace_runs(
    runs: Iterable[RecordedRun],
    *,
    rule: CommonRule = CommonRule(),  # noqa: B008 (frozen)
    keep_values: bool = False,
    flow: Flow | None = None,
    initial_state: bool = True,
    max_initial_places: int = MAX_INITIAL_PLACES,
) -> Flow:
    """Trace every run of ``runs`` into ``flow`` (a new one by default). ``initial_state``:
    values of the run's initial state (``RecordedRun.initial``) are a source, at the places
    of a contract's ``[initial]`` table. ``max_initial_places``: a state with more mapping
    places than this (a whole database, not a task's configuration) is not traced, with a
    warning: tracing its values at every place takes memory and time that grow with the
    places times the values (20 tau2 runs, each with its domain's whole database, 18,385 or
    58,532 places, were killed at 24 GiB)."""
    flow = flow if flow is not None else Flow()
    for run in runs:
        _trace(run, flow, rule, keep_values, initial_state, max_initial_places)
    return flow


def _properties(run: RecordedRun, tool: str) -> Mapping[str, Any]:
    schema = run.tools.get(tool) if run.tools is not None else None
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return props if isinstance(props, Mapping) else {}


def _enums(props: Mapping[str, Any]) -> Mapping[str, frozenset[Any]]:
    out: dict[str, frozenset[Any]] = {}
    for name, prop in props.items():
        enum = prop.get("enum") if isinstance(prop, Mapping) else None
        if isinstance(enum, list):
            out[str(name)] = frozenset(e for e in enum if isinstance(e, str))
    return out


def _trace_initial(
    run: RecordedRun, flow: Flow, produced: dict[Any, set[Place]], max_places: int
) -> None:
    """What the environment held before the first call (BFCL's initial_config): a source a
    contract's [initial] table binds, never shown to the model (not "seen"). A state with
    more than ``max_places`` places is counted for ``warn_empty`` and not traced."""
    places = list(candidate_places(run.initial))
    if len(places) > max_places:
        flow.initial_skipped += 1
        if flow.initial_skipped_first is None:
            flow.initial_skipped_first = (run.id, len(places), max_places)
        return
    for place, value in initial_leaves(run.initial, places):
        found = _lookup(produced, value)
        if found is None:
            with contextlib.suppress(TypeError):
                produced[value] = {(INITIAL, place)}
        else:
            found.add((INITIAL, place))


def _trace(
    run: RecordedRun,
    flow: Flow,
    rule: CommonRule,
    keep_values: bool,
    initial_state: bool,
    max_initial_places: int,
) -> None:
    flow.runs += 1
    said: list[str] = []
    given: set[Any] = set()
    produced: dict[Any, set[Place]] = {}
    seen_exact: set[str] = set()
    seen_texts: list[str] = []
    argument_values: set[Any] = set()
    execute = run.environment() if run.environment is not None else None
    # A replay's guard observes results (what `grounded` may find) once a grounded tool is
    # declared: from the start where the run lists its tools or runs live (every tool is
    # declared up front), else only from that tool's first call on. Results count as seen
    # only in the first case, so a rule's share is never better than the replay's.
    observed = run.tools is not None or isinstance(execute, LiveEnvironment)
    lifetimes = Lifetimes()
    # This run's leaves: (tool, path), signature, value key (None for a common value, whose
    # distinct values no rule counts). Tallied once the run is read (``_tally``).
    read: list[tuple[tuple[str, str], Leaf, int | None]] = []
    # Leaves that introduced their value, and the last accepted call naming each value: a
    # later use marks them ``creates`` once the run is read.
    fresh: list[tuple[int, int, Any]] = []
    last_use: dict[Any, int] = {}
    number = 0
    if initial_state and run.initial is not None:
        _trace_initial(run, flow, produced, max_initial_places)
    for event in run.events:
        if isinstance(event, Said):
            said.append(event.text)
            values = user_values(event.text)
            given.update(values)
            lifetimes.said(values)
            continue
        for call in event.calls:
            count = flow.tools.setdefault(call.name, ToolCount())
            count.calls += 1
            answer: Answer | None = execute(call) if execute is not None else call.answer
            if answer is None:
                continue
            count.answered += 1
            arguments = _arguments(call.arguments)
            if arguments is None:
                continue
            leaves = list(argument_leaves(arguments))
            lifetimes.used(call.name, [(p, v) for p, v, _ in leaves], not answer.error)
            if answer.error:
                continue
            count.accepted += 1
            number += 1
            props = _properties(run, call.name)
            enums = _enums(props)
            opened: list[tuple[str, Leaf, int | None, Any]] = []
            for path, value, top in leaves:
                text = value if isinstance(value, str) else str(value)
                root = path.split(".", 1)[0].removesuffix("[]")
                producers = _shared(flow, _lookup(produced, value))
                common = rule.common(value, enums.get(root, frozenset())) and not (
                    rule.named_ids and named_id(value, path, producers)
                )
                leaf = Leaf(
                    common=common,
                    producers=producers,
                    user_given=_has(given, value),
                    # Read only of an uncommon value (`grounded`'s evidence, --explain's
                    # columns): left False on a common one, so that a flag's or a small
                    # number's chance substrings make no signatures of their own.
                    said=not common and any(text in t for t in said),
                    seen=text in seen_exact or any(text in t for t in said + seen_texts),
                    in_arguments=not common and _has(argument_values, value),
                    top=top,
                    placeholder=is_placeholder(text),
                    fraction=isinstance(value, float),
                )
                key = None if leaf.common else value_key(value)
                read.append(((call.name, path), leaf, key))
                if keep_values and value is not None:
                    seen_values = flow.examples.setdefault((call.name, path), [])
                    keep_smallest(seen_values, repr(value), MAX_COUNTEREXAMPLES)
                if not (producers or leaf.in_arguments or leaf.common):
                    fresh.append((len(read) - 1, number, value))
                if top:
                    domain = flow.domains.setdefault((call.name, path), Domain())
                    domain.add(value, run.id)
                    domain.says(props.get(path))
                if "." not in path and "[]" not in path:
                    opened.append((path, leaf, key, value))
            for _, value, _ in leaves:
                _add(argument_values, value)
                with contextlib.suppress(TypeError):
                    last_use[value] = number
            places = list(result_leaves(answer.result))
            places += [(k, v) for p, v in places if (k := key_place(p)) is not None]
            lifetimes.answered(call.name, places)
            for path, leaf, key, value in opened:
                if key is not None and (leaf.producers or leaf.user_given):
                    lifetimes.open(call.name, path, value, key, leaf.producers, leaf.user_given)
            for place, value in places:
                found = _lookup(produced, value)
                if found is None:
                    with contextlib.suppress(TypeError):  # an unhashable value binds nothing
                        produced[value] = {(call.name, place)}
                else:
                    found.add((call.name, place))
            if observed and isinstance(answer.result, str):
                seen_texts.append(answer.result)
            elif observed:
                add_leaves(answer.result, seen_exact.add)  # as the guard observes a result
    hold(flow.holders, flow.shared, run.id, produced, rule)
    for index, at, value in fresh:
        if _later(last_use, value, at):
            where, leaf, key = read[index]
            read[index] = (where, replace(leaf, creates=True), key)
    _tally(flow.leaves, run.id, read)
    afters = [
        (where, after, key if after.may_be_evidence else None)
        for where, after, key in lifetimes.close()
    ]
    _tally(flow.after, run.id, afters)


def _tally(
    tallies: dict[tuple[str, str], Tally[S]],
    run: str,
    records: list[tuple[tuple[str, str], S, int | None]],
) -> None:
    """Hand one run's records to their paths' tallies, each path's all at once (a tally
    counts a trajectory when its run is added)."""
    by_path: dict[tuple[str, str], list[tuple[S, int | None]]] = {}
    for where, record, key in records:
        by_path.setdefault(where, []).append((record, key))
    for where, items in by_path.items():
        tally = tallies.get(where)
        if tally is None:
            tally = tallies[where] = Tally()
        tally.add_run(run, items)


def _later(last_use: dict[Any, int], value: Any, at: int) -> bool:
    try:
        return last_use.get(value, 0) > at
    except TypeError:
        return False


def _arguments(raw: Any) -> Mapping[str, Any] | None:
    """The call's arguments as the guard reads them: a mapping, or JSON text of one (parsed
    as data); anything else could not have run."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):  # nested past the parser's stack: unread too
            return None
    return raw if isinstance(raw, Mapping) else None


def _shared(flow: Flow, places: set[Place] | None) -> frozenset[Place]:
    if not places:
        return _NONE
    key = frozenset(places)
    return flow.shared.setdefault(key, key)


_NONE: frozenset[Place] = frozenset()


def _lookup(produced: dict[Any, set[Place]], value: Any) -> set[Place] | None:
    try:
        return produced.get(value)
    except TypeError:
        return None


def _has(values: set[Any], value: Any) -> bool:
    try:
        return value in values
    except TypeError:
        return False


def _add(values: set[Any], value: Any) -> None:
    with contextlib.suppress(TypeError):
        values.add(value)
