"""``invalidates`` proposals: an accepted call of a tool after which the value of its argument
stops being a usable value of a kind (the ``refs`` kinds already proposed).

For one (tool, top-level argument) and one kind, an occurrence is an accepted call whose
uncommon value was bound as that kind when it ran (produced at one of the kind's places, or a
value the user gave): exactly the calls after which a replay with the rule makes the value
stale. An occurrence is

- a counterexample when a later call the environment accepted used the value in an argument
  that ``refs`` the kind, with no result at one of the kind's places and no user message
  giving it again in between (the rule would flag that call);
- evidence when a later such use was rejected by the environment, or when a tool that had
  produced the value at one of the kind's places answered again without it and the value
  never reappeared in any result.

The rule is proposed for the kind with the most occurrences (ties by name) when at least
``min_support`` trajectories hold evidence, at least ``min_share`` of the occurrences are not
counterexamples, and evidence outnumbers counterexamples.
"""

from __future__ import annotations

from .evidence import Tally
from .flow import Flow
from .lifetime import After, Place
from .proposal import Proposal


def _judge(
    after: After, places: frozenset[Place], users: frozenset[tuple[str, str]]
) -> tuple[bool, bool, bool]:
    """(counterexample, a later use rejected, vanished)."""
    bad = rejected = False
    for use in after.uses:
        # A use after the user gave the value again is not kept (lifetime.py): bound anew.
        if (use.tool, use.path) not in users or use.rebound & places:
            continue
        if use.accepted:
            bad = True
        else:
            rejected = True
    return bad, rejected, bool(after.vanished & places)


def propose_invalidates(
    flow: Flow, refs: list[Proposal], *, min_support: int, min_share: float
) -> list[Proposal]:
    """The ``invalidates`` rules over the kinds of ``refs`` (merged and named), sorted by
    (tool, path)."""
    kinds: dict[str, tuple[frozenset[Place], frozenset[tuple[str, str]]]] = {}
    for ref in refs:
        places, users = kinds.get(ref.kind, (frozenset(), frozenset()))
        kinds[ref.kind] = (places | frozenset(ref.places), users | {(ref.tool, ref.path)})
    out: list[Proposal] = []
    for (tool, path), afters in sorted(flow.after.items()):
        best: Proposal | None = None
        for kind in sorted(kinds):
            places, users = kinds[kind]
            found = _rule(tool, path, kind, places, users, afters, min_support, min_share)
            if found is not None and (best is None or found.total > best.total):
                best = found
        if best is not None:
            out.append(best)
    return out


def _rule(
    tool: str,
    path: str,
    kind: str,
    places: frozenset[Place],
    users: frozenset[tuple[str, str]],
    afters: Tally[After],
    min_support: int,
    min_share: float,
) -> Proposal | None:
    # Each occurrence's signature judged once, weighing as many values as had it.
    judged = {
        after: _judge(after, places, users)
        for after in afters.counts
        if after.user_given or after.producers & places
    }

    def weigh(which: int) -> int:
        return sum(afters.counts[after] for after, verdict in judged.items() if verdict[which])

    def evidence(after: After) -> bool:
        verdict = judged.get(after)
        return verdict is not None and (verdict[1] or verdict[2])

    def failing(after: After) -> bool:
        verdict = judged.get(after)
        return verdict is not None and verdict[0]

    total = sum(afters.counts[after] for after in judged)
    bad = weigh(0)
    support = afters.trajectories(evidence)
    if support < min_support or total - bad < min_share * total or afters.count(evidence) <= bad:
        return None
    return Proposal(
        "invalidates",
        tool,
        path,
        support,
        total - bad,
        total,
        afters.first_runs(failing),
        afters.trajectories(failing),
        tuple(sorted(places)),
        kind=kind,
        detail=f"{weigh(1)} later use(s) rejected, {weigh(2)} vanished from results",
        distinct=afters.distinct(evidence),
    )
