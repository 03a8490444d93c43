"""Rules proposed from a :class:`Flow`, each with its evidence.

``refs`` + ``produces``: for one (tool, argument path), the producer places that explain its
values are chosen greedily (the place explaining the most uncommon values first; of places
explaining as many, an exact path before a key name, then by name) until no place adds one;
then every other tool's result at a chosen path that produced some of those values too joins
them (the cover alone would keep one of several tools listing the same records). The rule is
proposed when

- at least ``min_support`` trajectories hold an uncommon value it explains (support),
- at least ``min_share`` of all the path's values (common ones too: the guard checks them)
  pass it, as a replay would check them: produced earlier at one of its places, or a value
  the user gave (share), and
- most uncommon values came from those places rather than from the user alone.

Places of the environment's initial state (a contract's ``[initial]`` table) join the cover
only for values no earlier result explains (``_rank``). Once the kinds are named, a further
place that only ever held one kind's values joins it (``closure.py``).

Places of rules that share a place are one kind (merged), and so are two rules when a place
of the one held the other's argument values in ``min_support`` trajectories (``_feeders``);
a kind is named after the place explaining the most values.

``grounded``: a top-level argument most of whose uncommon values appear in the user's or
system's text, passing (seen, not a placeholder) for ``min_share`` of its values, in
``min_support`` trajectories and with ``min_distinct`` distinct values among that evidence
(a value of a few that the text happens to hold, or one scenario run again, is no
independent evidence that the argument copies what the user said; a ``refs`` rule's evidence
is a value flowing from one place, which holds even when a backend hands out one id every
run); not proposed where ``refs`` is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from .closure import close_places
from .evidence import Tally
from .flow import Flow, Leaf, Place
from .invalidates import propose_invalidates
from .proposal import Proposal
from .values import INITIAL, is_key_place

__all__ = ["Proposal", "kind_name", "propose"]


def propose(
    flow: Flow,
    *,
    min_support: int = 5,
    min_share: float = 0.95,
    min_distinct: int = 5,
    typed_quantities: bool = True,
    first_uses: bool = True,
    creator_names: bool = True,
    place_closure: bool = True,
) -> list[Proposal]:
    """The rules the flow supports, sorted by (tool, path, what): ``refs`` or ``grounded``
    per argument, then ``invalidates`` over the refs' kinds (``invalidates.py``).
    ``typed_quantities``: no ``refs`` on a quantity the user types (:func:`_typed_quantity`);
    ``first_uses``: ``grounded`` counts only a value's first use as evidence;
    ``creator_names``: no ``grounded`` on the name of what the call creates (``_grounded``);
    ``place_closure``: a place that only ever held one kind's values joins it (``closure.py``)."""
    out: list[Proposal] = []
    for (tool, path), leaves in sorted(flow.leaves.items()):
        found = None
        if not (typed_quantities and _typed_quantity(leaves)):
            found = _refs(tool, path, leaves, (min_support, 1), min_share)
        if found is None:
            found = _grounded(
                tool,
                path,
                leaves,
                (min_support, min_distinct),
                min_share,
                first_uses,
                creator_names,
            )
        if found is not None:
            found.examples = list(flow.examples.get((tool, path), ()))
            out.append(found)
    named = [p for p in out if p.what == "refs"]
    _name_kinds(named, flow, min_support)
    if place_closure:
        close_places(named, flow, min_support=min_support, min_distinct=min_distinct)
        for rule in named:
            _recount(rule, flow.leaves[(rule.tool, rule.path)])
    out += propose_invalidates(flow, named, min_support=min_support, min_share=min_share)
    return sorted(out, key=lambda p: (p.tool, p.path, p.what))


def _uncommon(leaf: Leaf) -> bool:
    return not leaf.common


def _supported(
    leaves: Tally[Leaf], evidence: Callable[[Leaf], bool], minimum: tuple[int, int]
) -> tuple[int, int] | None:
    """(trajectories, distinct values) of the evidence, or None below either minimum."""
    support = leaves.trajectories(evidence)
    if support < minimum[0]:
        return None
    distinct = leaves.distinct(evidence)
    if distinct < minimum[1]:
        return None
    return support, distinct


def _refs(
    tool: str, path: str, leaves: Tally[Leaf], minimum: tuple[int, int], min_share: float
) -> Proposal | None:
    uncommon = leaves.count(_uncommon)
    places: list[Place] = []
    # The leaves' signatures, each weighing as many leaves as had it.
    left = {leaf: n for leaf, n in leaves.counts.items() if not leaf.common and leaf.producers}
    while left:
        counts: Counter[Place] = Counter()
        for leaf, n in left.items():
            for p in leaf.producers:
                counts[p] += n
        best = min(counts, key=lambda p: _rank(p, counts[p]))
        places.append(best)
        left = {leaf: n for leaf, n in left.items() if best not in leaf.producers}
    cover = frozenset(places)

    def explained(leaf: Leaf) -> bool:
        return not leaf.common and bool(leaf.producers & cover)

    # The same path at another tool that produced some of these values too (an entity's
    # name in every result listing entities): the greedy cover stops at the first tool
    # that explains a value, and a replay binding it only there would flag the others.
    paths = {where for _, where in places}
    chosen = cover | {
        p for leaf in leaves.counts if explained(leaf) for p in leaf.producers if p[1] in paths
    }
    support = _supported(leaves, explained, minimum)
    if not places or support is None or 2 * leaves.count(explained) <= uncommon:
        return None
    return _proposal("refs", tool, path, leaves, support, min_share, chosen)


def _typed_quantity(leaves: Tally[Leaf]) -> bool:
    """A quantity the user types: the argument takes numbers written with a decimal point
    (a price, an amount: an id is a string or a whole number), and some value of it passed
    only as one the user gave (typed, not produced). A replay binds the whole numbers a user
    typed (``replay.given``), never ``25.50``, so a ``refs`` rule there flags every call whose
    user types a price with cents, however the training prices happened to be written."""
    return any(leaf.fraction for leaf in leaves.counts) and any(
        leaf.user_given and not leaf.producers for leaf in leaves.counts
    )


def _rank(place: Place, count: int) -> tuple[bool, int, int, bool, Place]:
    """The greedy cover's order: a place in an earlier result before one of the initial
    state (a value that flowed from a call is the stronger evidence; the state explains
    only what no result does), then the most values explained; of the initial state's, a
    field of listed records, then the keys of records keyed by id, then a map's values,
    then a lone field last, which equals an id by coincidence as often as not (a counter
    is the next record's id); then an exact path before a key name, then by name."""
    tool, where = place
    order = 0
    if tool == INITIAL:
        order = 2 if where.endswith("{}") else 3 if where.endswith(".*") else 1
        order = 4 if order == 1 and "[]" not in where else order
    return (tool == INITIAL, -count, order, is_key_place(where), place)


def _grounded(
    tool: str,
    path: str,
    leaves: Tally[Leaf],
    minimum: tuple[int, int],
    min_share: float,
    first_uses: bool = True,
    creator_names: bool = True,
) -> Proposal | None:
    """``first_uses``: a value an earlier call's arguments already held (``echo`` writing
    the file ``touch`` made) is the agent reusing its own value, whatever it was built
    from, not evidence that it copies what the user said; only a first use counts.
    ``creator_names``: an argument most of whose uncommon values name what the call
    creates (``Leaf.creates``: new, and named again by later calls, as ``touch``'s file) is
    a name the agent may compose (the same name with another extension) as well as copy;
    the information check flags every composed one, so it is not ``grounded``."""
    if not all(leaf.top for leaf in leaves.counts):
        return None  # grounded reads the whole argument: a list or an object is never seen
    uncommon = leaves.count(_uncommon)
    if creator_names and 2 * leaves.count(lambda leaf: leaf.creates) > uncommon:
        return None

    def evidence(leaf: Leaf) -> bool:
        return not leaf.common and leaf.said and not (first_uses and leaf.in_arguments)

    support = _supported(leaves, evidence, minimum)
    if support is None or 2 * leaves.count(evidence) <= uncommon:
        return None
    return _proposal("grounded", tool, path, leaves, support, min_share, frozenset())


def _passes(leaf: Leaf, what: str, places: frozenset[Place]) -> bool:
    if what == "refs":
        return bool(leaf.producers & places) or leaf.user_given
    return leaf.seen and not leaf.placeholder


def _proposal(
    what: str,
    tool: str,
    path: str,
    leaves: Tally[Leaf],
    support: tuple[int, int],
    min_share: float,
    places: frozenset[Place],
) -> Proposal | None:
    """The rule, with its counts (``examples`` are the caller's: they are per path)."""
    total = leaves.total()
    passed = leaves.count(lambda leaf: _passes(leaf, what, places))
    if passed < min_share * total:
        return None

    def failing(leaf: Leaf) -> bool:
        return not _passes(leaf, what, places)

    return Proposal(
        what,
        tool,
        path,
        support[0],
        passed,
        total,
        leaves.first_runs(failing),
        leaves.trajectories(failing),
        tuple(sorted(places)),
        distinct=support[1],
    )


def _name_kinds(rules: list[Proposal], flow: Flow, min_support: int) -> None:
    """Merge rules that share a producer place into one kind, and rules one of whose
    producer places fed the other's argument too (``_feeders``); name each kind."""
    parent: dict[Place, Place] = {}

    def find(p: Place) -> Place:
        while parent.setdefault(p, p) != p:
            p = parent[p]
        return p

    for rule in rules:
        for place in rule.places[1:]:
            a, b = find(rule.places[0]), find(place)
            if a != b:
                parent[max(a, b)] = min(a, b)
    for rule, place in _feeders(rules, flow, min_support):
        a, b = find(rule.places[0]), find(place)
        if a != b:
            parent[max(a, b)] = min(a, b)
    weight: Counter[Place] = Counter()
    for rule in rules:
        for leaf, n in flow.leaves[(rule.tool, rule.path)].counts.items():
            for place in leaf.producers & frozenset(rule.places):
                weight[place] += n
    groups: dict[Place, list[Place]] = {}
    for place in sorted({p for rule in rules for p in rule.places}):
        groups.setdefault(find(place), []).append(place)
    names: dict[Place, str] = {}
    taken: set[str] = set()
    for root in sorted(groups, key=lambda r: min(groups[r])):
        best = min(groups[root], key=lambda p: (-weight[p], is_key_place(p[1]), p))
        name = kind_name(best)
        if name in taken:
            name = f"{name}_from_{_word(best[0])}"
        while name in taken:
            name += "_"
        taken.add(name)
        names[root] = name
    for rule in rules:
        merged = tuple(groups[find(rule.places[0])])
        rule.kind = names[find(rule.places[0])]
        rule.places = merged
        _recount(rule, flow.leaves[(rule.tool, rule.path)])


def _feeders(rules: list[Proposal], flow: Flow, min_support: int) -> list[tuple[Proposal, Place]]:
    """(rule, another rule's place) where that place held the rule's argument values before
    its calls in at least ``min_support`` trajectories. The greedy cover keeps one place of
    several that explain the same values (``get_order_details``' ``$.id``, which echoes the
    id ``place_order`` made), so a producer of another argument's kind that fed this argument
    too is left out, and the two kinds stay apart; a replay then flags the legal call that
    uses the id straight from ``place_order``. Two producers feeding one argument are one
    kind; the support minimum keeps a value two places held by coincidence from merging."""
    chosen = sorted({p for rule in rules for p in rule.places})
    out: list[tuple[Proposal, Place]] = []
    for rule in rules:
        own = frozenset(rule.places)
        leaves = flow.leaves[(rule.tool, rule.path)]
        for place in chosen:
            if place not in own and leaves.trajectories(_fed_by(place)) >= min_support:
                out.append((rule, place))
    return out


def _fed_by(place: Place) -> Callable[[Leaf], bool]:
    return lambda leaf: not leaf.common and place in leaf.producers


def _recount(rule: Proposal, leaves: Tally[Leaf]) -> None:
    """The evidence again with the merged kind's places (more places: never fewer passes)."""
    places = frozenset(rule.places)

    def failing(leaf: Leaf) -> bool:
        return not _passes(leaf, rule.what, places)

    rule.passed = leaves.count(lambda leaf: _passes(leaf, rule.what, places))
    rule.counterexamples = leaves.first_runs(failing)
    rule.failing_runs = leaves.trajectories(failing)


def kind_name(place: Place) -> str:
    """``contacts[].id`` -> ``contact_id``, ``$.ticket_id`` -> ``ticket_id``, ``files[]`` ->
    ``file``, ``orders{}`` (an initial state's keys) -> ``order_key``, a whole result ->
    ``<tool>_result``."""
    tool, where = place
    parts = [p for p in where.removeprefix("$.").split(".") if p]
    if where in ("$", "[]") or not parts:
        return f"{_word(tool)}_result"
    last = parts[-1]
    if last.endswith("{}"):  # the keys of records keyed by their ids: `orders{}` -> order_key
        return f"{_singular(_word(last[:-2]))}_key"
    if last == "*" and len(parts) > 1:  # a map's values: `user_map.*` -> user_map_value
        return f"{_singular(_word(parts[-2].removesuffix('[]')))}_value"
    if last.endswith("[]"):
        return _singular(_word(last[:-2]))
    leaf = _word(last)
    if len(parts) > 1 and parts[-2].endswith("[]"):
        owner = _singular(_word(parts[-2][:-2]))
        return leaf if leaf.startswith(owner + "_") else f"{owner}_{leaf}"
    return leaf


def _word(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "value"


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word
