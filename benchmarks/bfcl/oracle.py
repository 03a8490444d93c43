"""Replay a trajectory on the raw backends (no guard): the ground truth for every verdict.

Besides the first step the environment rejected, the replay judges the outcome the way
BFCL's multi-turn checker does, per turn: the backend state must equal the ground truth's
(BFCL's own ``_compare_instances``) and the ground truth's results of that turn must all be
among the results produced so far (BFCL's ``_is_subsequence_unordered``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.bfcl.data import Call, Task
from benchmarks.bfcl.env import Environment, Outcome, execute, state_differences


@dataclass
class Replay:
    outcomes: list[Outcome]
    env: Environment
    diff: dict[str, list[str]] = field(default_factory=dict)  # final state vs. ground truth
    success: bool | None = None  # BFCL's per-turn verdict; None without a reference

    @property
    def fed(self) -> int:
        """First step (1-based) the environment rejected; T + 1 when none."""
        for i, o in enumerate(self.outcomes, start=1):
            if o.rejected:
                return i
        return len(self.outcomes) + 1


@dataclass
class Reference:
    """The ground truth, turn by turn: its results and the state after each turn."""

    turn_texts: list[list[str]]
    turn_envs: list[Environment]


def replay(task: Task, calls: list[tuple[int, Call]], reference: Reference | None = None) -> Replay:
    # Like BFCL's executor, every public method of an involved class runs, even one that
    # miss_func withholds from the model's tool list at this turn: withholding is a property
    # of the offered tool set (the guard's business), not of the environment.
    env = Environment(task)
    outcomes: list[Outcome] = []
    ok = True
    n_turns = len(task.ground_truth)
    by_turn: dict[int, list[Call]] = {}
    for turn, call in calls:
        by_turn.setdefault(turn, []).append(call)
    texts: list[str] = []
    for turn in range(n_turns):
        for call in by_turn.get(turn, []):
            outcome = execute(env, call.name, env.normalise(call))
            outcomes.append(outcome)
            texts.append(outcome.text)
        if reference is None or not task.ground_truth[turn]:
            continue  # BFCL checks nothing on turns where the answer is "no call"
        if ok and not by_turn.get(turn):
            ok = False
        if ok and state_differences(env, reference.turn_envs[turn]):
            ok = False
        if ok and not _covers(texts, reference.turn_texts[turn]):
            ok = False
    rep = Replay(outcomes, env)
    if reference is not None:
        rep.diff = state_differences(env, reference.turn_envs[-1])
        rep.success = ok
    return rep


def _covers(produced: list[str], expected: list[str]) -> bool:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
        _is_subsequence_unordered,
    )

    return _is_subsequence_unordered(expected, produced)[0]


_REFERENCES: dict[str, Reference] = {}


def reference(task: Task) -> Reference:
    """The ground truth's per-turn results and states (cached: every mutation compares to it).

    Each turn-end state is a fresh replay of the prefix: the backends hold objects
    (directories with parent links, RNGs) that a deepcopy snapshot would get subtly wrong.
    """
    if task.id in _REFERENCES:
        return _REFERENCES[task.id]
    texts: list[list[str]] = []
    envs: list[Environment] = []
    for turn in range(len(task.ground_truth)):
        prefix = [(t, c) for t, c in task.flat_calls() if t <= turn]
        env = Environment(task)
        outs = [execute(env, c.name, env.normalise(c)) for _, c in prefix]
        texts.append([o.text for (t, _), o in zip(prefix, outs, strict=True) if t == turn])
        envs.append(env)
    _REFERENCES[task.id] = Reference(texts, envs)
    return _REFERENCES[task.id]


def ground_truth_replay(task: Task) -> Replay:
    return replay(task, task.flat_calls(), reference(task))
