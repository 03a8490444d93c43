"""Does the undo on read (``fork.begin_live``) undo exactly, and keep exactly, on tau2?

The comparison's undo-log configurations run in log mode, where every call is kept, so this
check exercises both sides outside the guard, on tau2's own fresh environments, for every
call of a sample of trajectories (the first tasks of each domain: their ground truth and
every wrong-id injection). tau2's database hash (``get_db_hash``: the whole database as
JSON) is the measure; hashing the airline database takes about a third of a second, hence
the sample.

- **rollback**: the call runs inside the undo on read and is rolled back; the database hash
  must be the one from before the call;
- **keep**: the call runs again and is kept; the answer must be the one a plain environment
  gives for the same call, and at the end of the trajectory both databases must hash alike;
- **read tools**: a tool tau2 declares not to write (``_tau2.read_tools``), whose dry run in
  the comparison journals nothing, must leave the database hash as it was.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from benchmarks.tau2._tau2 import fresh_environment, read_tools, tool_call
from benchmarks.tau2.fork import begin_live, keep_live, roll_back_live
from benchmarks.tau2.inject import inject, injection_classes
from benchmarks.tau2.specs import Live
from benchmarks.tau2.tasks import GroundTruth


def check_calls(task: GroundTruth) -> dict[str, int]:
    plain, logged = fresh_environment(task.domain), fresh_environment(task.domain)
    live = Live(env=logged)
    reads = read_tools(task.domain)
    out = collections.Counter(
        calls=0, rollback_exact=0, same_answer=0, trajectories=1, read_calls=0, read_unchanged=0
    )
    for i, call in enumerate(task.calls, start=1):
        message = tool_call(call.name, call.arguments, f"call-{i}")
        before = logged.get_db_hash()
        transaction = begin_live(live)
        logged.get_response(message)
        roll_back_live(transaction)
        out["rollback_exact"] += logged.get_db_hash() == before
        transaction = begin_live(live)
        answer = logged.get_response(message)
        keep_live(transaction)
        if call.name in reads:  # what the comparison's read-tool transaction relies on
            out["read_calls"] += 1
            out["read_unchanged"] += logged.get_db_hash() == before
        expected = plain.get_response(message)
        out["same_answer"] += (answer.error, answer.content) == (expected.error, expected.content)
        out["calls"] += 1
    out["keep_exact"] += logged.get_db_hash() == plain.get_db_hash()
    return dict(out)


def check_all(tasks: Sequence[GroundTruth], seed: int = 0) -> dict[str, int]:
    total: collections.Counter[str] = collections.Counter()
    for task in tasks:
        total.update(check_calls(task))
        for cls in injection_classes(task.domain):
            injected = inject(task, cls, seed)
            if injected is not None:
                total.update(check_calls(injected.task))
    return dict(total)


def markdown(counts: dict[str, Any], tasks: int) -> list[str]:
    calls, runs = counts.get("calls", 0), counts.get("trajectories", 0)
    reads = counts.get("read_calls", 0)
    exact = (
        calls
        and counts.get("rollback_exact") == calls == counts.get("same_answer")
        and counts.get("keep_exact") == runs
        and counts.get("read_unchanged") == reads
    )
    return [
        f"The first {tasks} tasks per domain, ground truth and injections ({runs} "
        f"trajectories, {calls} calls), on tau2's own environments: rolled back, the database "
        f"hash is the one from before the call on {counts.get('rollback_exact', 0)}/{calls} "
        f"calls; kept, the answer equals a plain environment's on "
        f"{counts.get('same_answer', 0)}/{calls} and the final database hashes alike on "
        f"{counts.get('keep_exact', 0)}/{runs} trajectories; the calls of tools tau2 "
        f"declares not to write left the hash unchanged on "
        f"{counts.get('read_unchanged', 0)}/{reads}. Undo on read exact: "
        f"**{'yes' if exact else 'NO'}**.",
    ]
