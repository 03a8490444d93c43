"""The evidence is tallied by signature as it is read (``toolguard/infer/evidence.py``): its
size follows the tools' structure, not the number of runs, and it gives the very proposals
the per-value records it replaced gave.

The reference below is the code before the tally (``propose.py`` and ``invalidates.py`` of
commit eb5a362, reading one record per argument value), kept small: it reads the records a
spy on ``Tally.add_run`` saw, so both sides see the same trace.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import Call, run, write

from benchmarks.infer.synthetic import synthetic_run
from toolguard.infer import CommonRule, Flow, propose, trace_runs
from toolguard.infer.closure import close_places
from toolguard.infer.evidence import MAX_COUNTEREXAMPLES, Tally
from toolguard.infer.explain import explain
from toolguard.infer.invalidates import _judge
from toolguard.infer.keys import KeySet, union_size
from toolguard.infer.lifetime import Lifetimes
from toolguard.infer.propose import Proposal, _passes, _rank, kind_name
from toolguard.infer.values import is_key_place
from toolguard.replay.sources import read_runs

Place = tuple[str, str]

# -- memory: entries after 200 and 2,000 runs of the same structure -----------------------


def _letters(n: int, width: int = 5) -> str:
    out = ""
    for _ in range(width):
        n, digit = divmod(n, 26)
        out += chr(ord("a") + digit)
    return out


def _repeated(index: int) -> dict[str, Any]:
    """Run ``index``: one of four scenarios, each always the same calls in the same order,
    with values of its own (ids and names made of letters, so that no value is a substring
    of another run's and only the structure repeats)."""
    ids = [f"tk{_letters(index)}{slot}" for slot in "xyz"]
    who = f"Cu{_letters(index)}"
    search: Call = ("search_tickets", {"customer": who}, {"tickets": [{"id": i} for i in ids[:2]]})
    scenarios: list[list[Call]] = [
        [search, ("get_ticket", {"ticket_id": ids[0]}, {"id": ids[0], "subject": "printer"})],
        [
            search,
            ("close_ticket", {"ticket_id": ids[1], "reason": "refund"}, {"ok": True}),
            ("search_tickets", {"customer": who}, {"tickets": [{"id": ids[0]}]}),
            ("get_ticket", {"ticket_id": ids[1]}, {"error": "closed"}),
        ],
        [("get_ticket", {"ticket_id": ids[2]}, {"id": ids[2]}), ("count", {"n": 7}, {"n": 3})],
        [search, ("update_ticket", {"ticket_id": ids[0], "priority": 2}, {"ok": True})],
    ]
    kind = index % len(scenarios)
    error_at = 3 if kind == 1 else None
    user = f"I am {who}; my ticket {ids[2]}"
    return run(f"rep{index:05d}", user, *scenarios[kind], error_at=error_at)


def _entries(flow: Flow) -> dict[str, int]:
    tallies: list[Tally[Any]] = [*flow.leaves.values(), *flow.after.values()]
    return {
        "paths": len(flow.leaves) + len(flow.after) + len(flow.domains),
        "tallied": sum(t.entries() for t in tallies),
        "first run ids": sum(len(ids) for t in tallies for ids in t.first.values()),
        "holders": sum(1 + len(h.others) for h in flow.holders.values()),
        "shared producer sets": len(flow.shared),
    }


def _keys(flow: Flow) -> int:
    tallies: list[Tally[Any]] = [*flow.leaves.values(), *flow.after.values()]
    return sum(len(k) for t in tallies for k in t.keys.values())


def _trace(rows: list[dict[str, Any]], folder: str, name: str) -> Flow:
    return trace_runs(read_runs("openai", [write(folder, rows, name)]), rule=CommonRule())


def test_the_tallies_stop_growing_with_the_runs() -> None:
    with tempfile.TemporaryDirectory() as folder:
        small = _trace([_repeated(i) for i in range(200)], folder, "small.jsonl")
        large = _trace([_repeated(i) for i in range(2000)], folder, "large.jsonl")
    assert small.runs == 200 and large.runs == 2000
    assert _entries(small) == _entries(large)
    assert _entries(large)["tallied"] > 0
    # What does grow: one 8-byte key per distinct value, for the exact distinct counts the
    # comments print (keys.py). Every run's ids and names are new here, so ten times the runs
    # give ten times the keys, but for the one value every run shares (reason "refund").
    assert _keys(large) - 1 == 10 * (_keys(small) - 1)
    assert 'refs."ticket_id"' in _contract(large)


def _contract(flow: Flow) -> str:
    rules = propose(flow, min_support=5, min_share=0.9, min_distinct=5)
    return "\n".join(f'{r.what}."{r.path}"' for r in rules)


# -- the tally's counts are the records' ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 7), st.integers(0, 40)), max_size=200
    ),
    chosen=st.sets(st.integers(0, 7)),
)
def test_a_tally_counts_as_the_records_do(
    records: list[tuple[int, int, int]], chosen: set[int]
) -> None:
    """(run, signature, key) records, added run by run: every count over the signatures in
    ``chosen`` equals the one over the records themselves."""
    tally: Tally[int] = Tally()
    by_run: dict[int, list[tuple[int, int | None]]] = {}
    for number, sig, key in records:
        by_run.setdefault(number, []).append((sig, key))
    for number, items in by_run.items():
        tally.add_run(f"r{number}", items)
    passing = [(f"r{n}", s, k) for n, s, k in records if s in chosen]
    test = chosen.__contains__
    assert tally.total() == len(records)
    assert tally.count(test) == len(passing)
    assert tally.trajectories(test) == len({r for r, _, _ in passing})
    assert tally.distinct(test) == len({k for _, _, k in passing})
    assert tally.first_runs(test) == sorted({r for r, _, _ in passing})[:MAX_COUNTEREXAMPLES]


def test_a_key_set_is_a_set() -> None:
    rng = random.Random(3)
    pool = [rng.getrandbits(64) for _ in range(6000)]
    sets = [KeySet() for _ in range(3)]
    plain: list[set[int]] = [set() for _ in range(3)]
    for _ in range(40000):  # many merges: the pending part passes an eighth of the array
        key, which = rng.choice(pool), rng.randrange(3)
        sets[which].add(key)
        plain[which].add(key)
    assert [len(s) for s in sets] == [len(p) for p in plain]
    for group in itertools.combinations(range(3), 2):
        union = set().union(*(plain[g] for g in group))
        assert union_size(sets[g] for g in group) == len(union)
    assert list(sets[0].merged()) == sorted(plain[0])


# -- a value's uses: only the first unbound one per (tool, path, answer) is kept -----------

_PLACES = [("search", "ids[]"), ("get", "$.id"), ("list", "id")]
_USERS = [("get", "item_id"), ("close", "item_id"), ("get", "other")]


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.one_of(
            st.just(("said",)),
            st.tuples(st.just("answer"), st.sampled_from(_PLACES), st.booleans()),
            st.tuples(st.just("use"), st.sampled_from(_USERS), st.booleans()),
        ),
        max_size=12,
    )
)
def test_the_kept_uses_judge_as_every_use_did(events: list[tuple[Any, ...]]) -> None:
    lifetimes = Lifetimes()
    lifetimes.open("search", "q", "v", 1, frozenset(_PLACES[:1]), False)
    every: list[tuple[str, str, bool, frozenset[Place], bool]] = []  # the records before
    rebound: set[Place] = set()
    said = False
    for event in events:
        if event[0] == "said":
            lifetimes.said(["v"])
            said = True
        elif event[0] == "answer":
            (tool, place), present = event[1], event[2]
            lifetimes.answered(tool, [(place, "v" if present else "w")])
            if present:
                rebound.add((tool, place))
        else:
            (tool, path), accepted = event[1], event[2]
            lifetimes.used(tool, [(path, "v")], accepted)
            every.append((tool, path, accepted, frozenset(rebound), said))
    [(_, after, _)] = list(lifetimes.close())
    for n, m in itertools.product(range(len(_PLACES) + 1), range(len(_USERS) + 1)):
        for places in itertools.combinations(_PLACES, n):
            for users in itertools.combinations(_USERS, m):
                bad = rejected = False
                for tool, path, accepted, again, was_said in every:
                    if (tool, path) not in users or was_said or again & set(places):
                        continue
                    bad, rejected = bad or accepted, rejected or not accepted
                got = _judge(after, frozenset(places), frozenset(users))
                assert got[:2] == (bad, rejected)


# -- the proposals: the per-value reference against the tally ------------------------------


@dataclass(frozen=True)
class _Rec:
    """One record as the code before the tally kept it: its signature, run and key."""

    sig: Any
    run: str
    key: int | None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sig, name)


def _spy(monkeypatch: pytest.MonkeyPatch) -> dict[int, list[_Rec]]:
    seen: dict[int, list[_Rec]] = {}
    add_run = Tally.add_run

    def spied(self: Tally[Any], run_id: str, records: Any) -> None:
        records = list(records)
        seen.setdefault(id(self), []).extend(_Rec(s, run_id, k) for s, k in records)
        add_run(self, run_id, records)

    monkeypatch.setattr(Tally, "add_run", spied)
    return seen


def _ref_supported(evidence: list[_Rec], minimum: tuple[int, int]) -> tuple[int, int] | None:
    support = len({leaf.run for leaf in evidence})
    distinct = len({leaf.key for leaf in evidence})
    if support < minimum[0] or distinct < minimum[1]:
        return None
    return support, distinct


def _ref_refs(
    tool: str, path: str, leaves: list[_Rec], minimum: tuple[int, int], share: float
) -> Proposal | None:
    evidence = [leaf for leaf in leaves if not leaf.common and leaf.producers]
    uncommon = sum(1 for leaf in leaves if not leaf.common)
    places: list[Place] = []
    left = list(evidence)
    while left:
        counts = Counter(p for leaf in left for p in leaf.producers)
        best = min(counts, key=lambda p: _rank(p, counts[p]))
        places.append(best)
        left = [leaf for leaf in left if best not in leaf.producers]
    explained = [leaf for leaf in evidence if leaf.producers & frozenset(places)]
    paths = {where for _, where in places}
    chosen = frozenset(places) | {p for leaf in explained for p in leaf.producers if p[1] in paths}
    support = _ref_supported(explained, minimum)
    if not places or support is None or 2 * len(explained) <= uncommon:
        return None
    return _ref_proposal("refs", tool, path, leaves, support, share, chosen)


def _ref_grounded(
    tool: str, path: str, leaves: list[_Rec], minimum: tuple[int, int], share: float
) -> Proposal | None:
    if not all(leaf.top for leaf in leaves):
        return None
    uncommon = sum(1 for leaf in leaves if not leaf.common)
    if 2 * sum(1 for leaf in leaves if leaf.creates) > uncommon:
        return None
    evidence = [leaf for leaf in leaves if not leaf.common and leaf.said and not leaf.in_arguments]
    support = _ref_supported(evidence, minimum)
    if support is None or 2 * len(evidence) <= uncommon:
        return None
    return _ref_proposal("grounded", tool, path, leaves, support, share, frozenset())


def _ref_proposal(
    what: str,
    tool: str,
    path: str,
    leaves: list[_Rec],
    support: tuple[int, int],
    share: float,
    places: frozenset[Place],
) -> Proposal | None:
    failing = sorted({leaf.run for leaf in leaves if not _passes(leaf.sig, what, places)})
    passed = sum(1 for leaf in leaves if _passes(leaf.sig, what, places))
    if passed < share * len(leaves):
        return None
    return Proposal(
        what,
        tool,
        path,
        support[0],
        passed,
        len(leaves),
        failing[:MAX_COUNTEREXAMPLES],
        len(failing),
        tuple(sorted(places)),
        distinct=support[1],
    )


def _ref_recount(rule: Proposal, leaves: list[_Rec]) -> None:
    places = frozenset(rule.places)
    failing = sorted({leaf.run for leaf in leaves if not _passes(leaf.sig, rule.what, places)})
    rule.passed = sum(1 for leaf in leaves if _passes(leaf.sig, rule.what, places))
    rule.counterexamples = failing[:MAX_COUNTEREXAMPLES]
    rule.failing_runs = len(failing)


def _ref_name_kinds(rules: list[Proposal], leaves: dict[Place, list[_Rec]]) -> None:
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
    weight: Counter[Place] = Counter()
    for rule in rules:
        for leaf in leaves[(rule.tool, rule.path)]:
            for place in leaf.producers & frozenset(rule.places):
                weight[place] += 1
    groups: dict[Place, list[Place]] = {}
    for place in sorted({p for rule in rules for p in rule.places}):
        groups.setdefault(find(place), []).append(place)
    names: dict[Place, str] = {}
    taken: set[str] = set()
    for root in sorted(groups, key=lambda r: min(groups[r])):
        best = min(groups[root], key=lambda p: (-weight[p], is_key_place(p[1]), p))
        name = kind_name(best)
        if name in taken:
            name = f"{name}_from_{re.sub(r'[^a-z0-9]+', '_', best[0].lower()).strip('_')}"
        while name in taken:
            name += "_"
        taken.add(name)
        names[root] = name
    for rule in rules:
        rule.kind = names[find(rule.places[0])]
        rule.places = tuple(groups[find(rule.places[0])])
        _ref_recount(rule, leaves[(rule.tool, rule.path)])


def _ref_invalidates(
    afters: dict[Place, list[_Rec]], refs: list[Proposal], min_support: int, min_share: float
) -> list[Proposal]:
    kinds: dict[str, tuple[frozenset[Place], frozenset[Place]]] = {}
    for ref in refs:
        places, users = kinds.get(ref.kind, (frozenset(), frozenset()))
        kinds[ref.kind] = (places | frozenset(ref.places), users | {(ref.tool, ref.path)})
    out: list[Proposal] = []
    for (tool, path), records in sorted(afters.items()):
        best: Proposal | None = None
        for kind in sorted(kinds):
            places, users = kinds[kind]
            occurrences = [a for a in records if a.user_given or a.producers & places]
            failing: set[str] = set()
            bad = rejected = vanished = 0
            runs: set[str] = set()
            keys: set[int | None] = set()
            for a in occurrences:
                is_bad, was_rejected, gone = _judge(a.sig, places, users)
                if is_bad:
                    bad += 1
                    failing.add(a.run)
                rejected += was_rejected
                vanished += gone
                if was_rejected or gone:
                    runs.add(a.run)
                    keys.add(a.key)
            assert None not in keys  # an evidence signature always has its keys
            total = len(occurrences)
            evidence = sum(1 for a in occurrences if any(_judge(a.sig, places, users)[1:]))
            if len(runs) < min_support or total - bad < min_share * total or evidence <= bad:
                continue
            found = Proposal(
                "invalidates",
                tool,
                path,
                len(runs),
                total - bad,
                total,
                sorted(failing)[:MAX_COUNTEREXAMPLES],
                len(failing),
                tuple(sorted(places)),
                kind=kind,
                detail=f"{rejected} later use(s) rejected, {vanished} vanished from results",
                distinct=len(keys),
            )
            if best is None or found.total > best.total:
                best = found
        if best is not None:
            out.append(best)
    return out


def _ref_propose(
    flow: Flow,
    seen: dict[int, list[_Rec]],
    *,
    min_support: int,
    min_share: float,
    min_distinct: int,
) -> list[Proposal]:
    support, share, distinct = min_support, min_share, min_distinct
    leaves = {where: seen[id(t)] for where, t in flow.leaves.items()}
    afters = {where: seen[id(t)] for where, t in flow.after.items()}
    out: list[Proposal] = []
    for (tool, path), records in sorted(leaves.items()):
        found = None
        fraction = any(leaf.fraction for leaf in records)
        if not (fraction and any(leaf.user_given and not leaf.producers for leaf in records)):
            found = _ref_refs(tool, path, records, (support, 1), share)
        if found is None:
            found = _ref_grounded(tool, path, records, (support, distinct), share)
        if found is not None:
            out.append(found)
    named = [p for p in out if p.what == "refs"]
    _ref_name_kinds(named, leaves)
    close_places(named, flow, min_support=support, min_distinct=distinct)
    for rule in named:
        _ref_recount(rule, leaves[(rule.tool, rule.path)])
    out += _ref_invalidates(afters, named, support, share)
    return sorted(out, key=lambda p: (p.tool, p.path, p.what))


def _ref_explain_rows(records: list[_Rec]) -> tuple[int, ...]:
    rare = [leaf for leaf in records if not leaf.common]
    return (
        len(records),
        len(records) - len(rare),
        sum(1 for leaf in rare if leaf.producers),
        sum(1 for leaf in rare if leaf.user_given),
        sum(1 for leaf in rare if leaf.said),
        sum(1 for leaf in rare if leaf.in_arguments),
    )


def _named(index: int, rng: random.Random) -> dict[str, Any]:
    """A run whose user names a file that the agent opens (``grounded``'s evidence), now and
    then a file no message named, and reads by the handle the open gave."""
    said = f"{rng.choice(['notes', 'plan', 'budget', 'draft', 'todo', 'log'])}{rng.randrange(9)}"
    name = said if rng.random() < 0.9 else "other.txt"
    handle = f"h{rng.randrange(10**6):06d}"
    calls: list[Call] = [
        ("open_file", {"path": name}, {"handle": handle}),
        ("read_file", {"handle": handle}, {"text": "..."}),
    ]
    return run(f"named{index:04d}", f"please open {said}", *calls[: rng.randint(1, 2)])


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(5, 300),
    support=st.integers(1, 6),
    share=st.sampled_from([0.5, 0.7, 0.9, 0.95, 1.0]),
    distinct=st.integers(1, 6),
)
def test_the_tally_proposes_what_the_records_did(
    seed: int, n: int, support: int, share: float, distinct: int
) -> None:
    rng = random.Random(seed)
    rows = [synthetic_run(i, rng) for i in range(n)]
    rows += [_named(i, rng) for i in range(n // 4)]
    rng.shuffle(rows)
    with pytest.MonkeyPatch.context() as monkeypatch, tempfile.TemporaryDirectory() as folder:
        seen = _spy(monkeypatch)
        flow = _trace(rows, folder, "runs.jsonl")
    got = propose(flow, min_support=support, min_share=share, min_distinct=distinct)
    assert got == _ref_propose(
        flow, seen, min_support=support, min_share=share, min_distinct=distinct
    )
    table = explain(flow).splitlines()[1:]
    for line, (where, tally) in zip(table, sorted(flow.leaves.items()), strict=True):
        cells = line.split()
        assert cells[:2] == list(where)
        counts = _ref_explain_rows(seen[id(tally)])
        assert tuple(int(c) for c in (*cells[2:5], *cells[-4:-1])) == counts


def test_the_reference_reads_every_record(tmp_path: Path) -> None:
    """The spy sees each run once per tally, as the records were kept before."""
    rng = random.Random(1)
    rows = [synthetic_run(i, rng) for i in range(30)]
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.MonkeyPatch.context() as monkeypatch:
        seen = _spy(monkeypatch)
        flow = trace_runs(read_runs("openai", [str(path)]), rule=CommonRule())
    for tally in flow.leaves.values():
        assert len(seen[id(tally)]) == tally.total()
        assert len({r.run for r in seen[id(tally)]}) == sum(tally.runs.values())
