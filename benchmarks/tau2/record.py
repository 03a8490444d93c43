"""``python -m benchmarks.tau2.record``: a tau2 results file made by tau2 itself, scored by tau2.

For the first ``--limit`` tasks of airline and retail, two "agents" act: ``ground-truth``
calls the task's ground-truth actions, ``wrong-id`` the same with one id replaced (the
harness's seeded ``missing_*`` injection, the first that fits). Every call is answered by
tau2's own environment (``get_response``), the messages are tau2's message models, and each
simulation's reward is tau2's own evaluators' (``EvaluationType.ALL``: the final database and
the expected actions and outputs; ``reward``). The file is the shape of tau2's
``Results`` (``info``, ``tasks``, ``simulations``), one per agent, so ``toolguard replay tau2``
reads it as it reads a leaderboard submission, and its final success can be set beside
tau2's own pass rate (``--summary`` prints both).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.tau2._tau2 import (
    DOMAINS,
    domain_api,
    fresh_environment,
    tau2_import_error,
    tool_call,
)
from benchmarks.tau2.inject import inject, injection_classes
from benchmarks.tau2.tasks import GroundTruth, load_tasks


def reward(domain: str, task: Any, messages: list[Any]) -> Any:
    """tau2's reward of EvaluationType.ALL: its environment, action and communicate
    evaluators, multiplied over the task's reward basis as ``evaluate_simulation`` does
    (that function itself imports the NL-assertion evaluator and so litellm, which the
    harness does not install; airline and retail tasks have no NL-assertion basis)."""
    from tau2.data_model.simulation import RewardInfo
    from tau2.data_model.tasks import RewardType
    from tau2.evaluator.evaluator_action import ActionEvaluator
    from tau2.evaluator.evaluator_communicate import CommunicateEvaluator
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    basis = set(task.evaluation_criteria.reward_basis)
    if RewardType.NL_ASSERTION in basis:
        raise ValueError(f"task {task.id}: NL assertions need tau2's LLM judge")
    env = EnvironmentEvaluator.calculate_reward(
        environment_constructor=domain_api(domain).get_environment,
        task=task,
        full_trajectory=messages,
        solo_mode=False,
    )
    action = ActionEvaluator.calculate_reward(task=task, full_trajectory=messages)
    communicate = CommunicateEvaluator.calculate_reward(task=task, full_trajectory=messages)
    value = 1.0
    if basis & {RewardType.DB, RewardType.ENV_ASSERTION}:
        value *= env.reward
    if basis & {RewardType.ACTION}:
        value *= action.reward
    if basis & {RewardType.COMMUNICATE}:
        value *= communicate.reward
    return RewardInfo(
        reward=value,
        db_check=env.db_check,
        action_checks=action.action_checks,
        communicate_checks=communicate.communicate_checks,
        reward_basis=task.evaluation_criteria.reward_basis,
    )


def simulation(domain: str, task: Any, truth: GroundTruth, agent: str) -> dict[str, Any]:
    """One simulation of ``truth``'s calls, answered and scored by tau2."""
    from tau2.data_model.message import AssistantMessage, UserMessage
    from tau2.data_model.simulation import SimulationRun, TerminationReason

    env = fresh_environment(domain)
    messages: list[Any] = [UserMessage(role="user", content=truth.user_text)]
    for k, c in enumerate(truth.calls, start=1):
        call = tool_call(c.name, c.arguments, f"call_{k}")
        messages.append(AssistantMessage(role="assistant", tool_calls=[call]))
        messages.append(env.get_response(call))
    messages.append(AssistantMessage(role="assistant", content="Done."))
    run = SimulationRun(
        id=f"{agent}/{domain}/{truth.task_id}",
        task_id=str(task.id),
        start_time="2026-01-01T00:00:00",
        end_time="2026-01-01T00:01:00",
        duration=60.0,
        termination_reason=TerminationReason.AGENT_STOP,
        messages=messages,
        trial=0,
    )
    run.reward_info = reward(domain, task, messages)
    dumped: dict[str, Any] = run.model_dump(mode="json")
    return dumped


def record(out: Path, limit: int, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Write ``OUT/<agent>.json`` per agent; returns tau2's own pass counts per agent."""
    sims: dict[str, list[dict[str, Any]]] = {"ground-truth": [], "wrong-id": []}
    for domain in DOMAINS:
        tasks = {str(t.id): t for t in domain_api(domain).get_tasks(None)}
        for truth in load_tasks(domain, limit):
            task = tasks[truth.task_id]
            sims["ground-truth"].append(simulation(domain, task, truth, "ground-truth"))
            for cls in injection_classes(domain):
                if cls.startswith("missing_") and (mutated := inject(truth, cls, seed)):
                    sims["wrong-id"].append(simulation(domain, task, mutated.task, "wrong-id"))
                    break
    out.mkdir(parents=True, exist_ok=True)
    summary = {}
    for agent, runs in sims.items():
        info = {"agent_info": {"llm": agent}, "environment_info": {"domain_name": "mixed"}}
        document = {"info": info, "tasks": [], "simulations": runs}
        (out / f"{agent}.json").write_text(json.dumps(document))
        rewards = [r["reward_info"]["reward"] for r in runs]
        passed = sum(abs(x - 1.0) <= 1e-6 for x in rewards)
        summary[agent] = {"n": len(runs), "passed": passed, "pass_rate": passed / len(runs)}
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tau2.record", description=__doc__)
    p.add_argument("--out", default="out/tau2-record")
    p.add_argument("--limit", type=int, default=20, help="tasks per domain")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if (why := tau2_import_error()) is not None:
        print(f"tau2 is not usable: {why}", file=sys.stderr)
        return 1
    for agent, row in record(Path(args.out), args.limit, args.seed).items():
        print(f"{agent}: tau2 pass rate {row['pass_rate']:.3f} ({row['passed']}/{row['n']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
