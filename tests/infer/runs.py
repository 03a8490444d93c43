"""Small recorded runs in the OpenAI chat shape, and inference + contract replay in process.

A module of its own (not conftest.py) so `from runs import ...` cannot pick up another
directory's conftest.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

import toolguard as tg
from toolguard.infer import CommonRule, propose, render, trace_runs
from toolguard.replay.engine import WITH_CONTRACT, Replayer
from toolguard.replay.sources import read_runs

Call = tuple[str, dict[str, Any], Any]  # (tool, arguments, result)


def run(run_id: str, user: str, *calls: Call, error_at: int | None = None) -> dict[str, Any]:
    """One run: a user message, then each call in its own turn with its answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
    for i, (name, arguments, result) in enumerate(calls):
        cid = f"c{i}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        content = {"error": "rejected"} if i == error_at else result
        messages.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(content)})
    return {"id": run_id, "messages": messages}


def write(folder: str, rows: Sequence[dict[str, Any]], name: str = "runs.jsonl") -> str:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def infer_text(
    path: str,
    *,
    min_support: int = 5,
    min_share: float = 0.95,
    min_distinct: int | None = None,
    show_values: bool = False,
) -> str:
    """The contract inferred from ``path``; ``min_distinct`` is ``min_support`` unless given."""
    distinct = min_support if min_distinct is None else min_distinct
    flow = trace_runs(read_runs("openai", [path]), rule=CommonRule(), keep_values=show_values)
    flow.warn_empty()
    rules = propose(flow, min_support=min_support, min_share=min_share, min_distinct=distinct)
    return render(
        rules,
        flow,
        min_support=min_support,
        min_share=min_share,
        min_distinct=distinct,
        show_values=show_values,
    )


def flagged(path: str, contract_text: str) -> list[tuple[str, int, str]]:
    """(run, step, check) of every call the contract flags when the runs are replayed."""
    with tempfile.TemporaryDirectory() as folder:
        contract_path = os.path.join(folder, "inferred.toml")
        with open(contract_path, "w", encoding="utf-8") as f:
            f.write(contract_text)
        replayer = Replayer(TracerProvider(), contract=tg.load_contract(contract_path))
        out = []
        for recorded in read_runs("openai", [path]):
            traj = replayer.replay(recorded, WITH_CONTRACT)
            for verdict in traj.verdicts:
                if not verdict.ok:
                    out.append((recorded.id, verdict.step, str(verdict.check)))
        return out
