"""What a dry run costs per call, against the tool's own execution (issue 15).

    python -m benchmarks.fork_cost [--quick] [--rounds N] [--json out.json]

Three environments, each with one tool that changes one record:

- a dict state of 10 contacts (small) and of 1,000 contacts (medium), reached through a
  ``tg.State`` parameter, forked with ``tg.DeepCopyFork()`` (a copy, tried, then the call runs
  again) and with ``tg.UndoLogFork()`` (transactional: the call runs once in an undo log);
- a SQLite database file of 1,000 accounts (WAL journal, synchronous=NORMAL), forked with
  ``tg.SQLiteSavepointFork`` (transactional: SAVEPOINT, the call, RELEASE); the tool commits
  its own write.

Per environment, side by side in interleaved rounds (medians over rounds, benchmarks/_timing):
the tool called bare, the guarded call without a dry run (``guard.call`` on the general path,
where every dry-run tool runs, so the difference is the dry run alone), the guarded call with
the dry run, and the strategy alone (fork, then keep for a transactional strategy, discard
otherwise). Tracing is off: span costs are overhead.py's.
"""

from __future__ import annotations

import argparse
import itertools
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import toolguard as tg

from ._timing import Case, interleaved, median, print_targets, quartiles, us, write_json

Contacts = dict[str, dict[str, Any]]


def contacts(n: int) -> Contacts:
    return {
        f"id_{i}": {"id": f"id_{i}", "name": f"Person {i}", "phone": f"+1-555-{i:04d}",
                    "tags": ["friend", "work"], "notes": "met at the conference"}
        for i in range(n)
    }  # fmt: skip


def timed(run: Callable[[int], None]) -> Case:
    def case(n: int) -> float:
        t0 = time.perf_counter()
        run(n)
        return time.perf_counter() - t0

    return case


def dict_cases(size: int, strategy: Any) -> dict[str, Case]:
    state = contacts(size)

    def set_phone(contact_id: str, phone: str, db: Annotated[Contacts, tg.State]) -> dict[str, str]:
        if contact_id not in db:
            return {"error": f"no contact {contact_id}"}
        db[contact_id]["phone"] = phone
        return {"id": contact_id}

    plain = tg.Guard(state=state, dry_run=False)
    plain.register(set_phone)
    forked = tg.Guard(state=state, dry_run=strategy)
    forked.register(set_phone)
    ids = itertools.cycle(list(state))
    close = getattr(strategy, "keep", strategy.discard)  # what an accepted call costs

    def bare(n: int) -> None:
        for _ in range(n):
            set_phone(next(ids), "+1-555-9999", state)

    def guarded(guard: tg.Guard) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                guard.call("set_phone", {"contact_id": next(ids), "phone": "+1-555-9999"})

        return run

    def fork_only(n: int) -> None:
        for _ in range(n):
            close(strategy.fork(state))

    return {
        "tool": timed(bare),
        "guard": timed(guarded(plain)),
        "guard+dry_run": timed(guarded(forked)),
        "fork+discard": timed(fork_only),
    }


def sqlite_cases(
    directory: Path, rows: int = 1000, guard_transactions: bool = True
) -> tuple[dict[str, Case], sqlite3.Connection]:
    conn = sqlite3.connect(directory / f"accounts-{guard_transactions}.db")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER CHECK (balance >= 0))"
    )
    conn.executemany("INSERT INTO accounts VALUES (?, ?)", ((f"a{i}", 10**9) for i in range(rows)))
    conn.commit()

    def debit(account: str, amount: int) -> dict[str, int]:
        cur = conn.execute(
            "UPDATE accounts SET balance = balance - ? WHERE id = ?", (amount, account)
        )
        if cur.rowcount == 0:
            return {"error": 1}
        conn.commit()
        return {"ok": 1}

    plain = tg.Guard(dry_run=False)
    plain.register(debit)
    strategy = tg.SQLiteSavepointFork(conn, guard_transactions=guard_transactions)
    forked = tg.Guard(dry_run=strategy)
    forked.register(debit)
    ids = itertools.cycle([f"a{i}" for i in range(rows)])

    def bare(n: int) -> None:
        for _ in range(n):
            debit(next(ids), 1)

    def guarded(guard: tg.Guard) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                guard.call("debit", {"account": next(ids), "amount": 1})

        return run

    def fork_only(n: int) -> None:
        for _ in range(n):
            strategy.keep(strategy.fork(None))

    cases = {
        "tool": timed(bare),
        "guard": timed(guarded(plain)),
        "guard+dry_run": timed(guarded(forked)),
        "fork+discard": timed(fork_only),
    }
    return cases, conn


def summarise(samples: dict[str, list[float]]) -> dict[str, float]:
    tool = median(samples["tool"])
    added = [d - g for d, g in zip(samples["guard+dry_run"], samples["guard"], strict=True)]
    ratios = [a / t for a, t in zip(added, samples["tool"], strict=True) if t > 0]
    low, high = quartiles(ratios)
    return {
        "tool_us": tool * 1e6,
        "guard_us": median(samples["guard"]) * 1e6,
        "guard_dry_run_us": median(samples["guard+dry_run"]) * 1e6,
        "dry_run_added_us": median(added) * 1e6,
        "fork_discard_us": median(samples["fork+discard"]) * 1e6,
        "dry_run_over_tool": median(ratios),
        "dry_run_over_tool_q1": low,
        "dry_run_over_tool_q3": high,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke run)")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else args.rounds
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        environments: list[tuple[str, dict[str, Case], int]] = [
            ("dict 10, deep copy", dict_cases(10, tg.DeepCopyFork()), 2000),
            ("dict 1,000, deep copy", dict_cases(1000, tg.DeepCopyFork()), 20),
            ("dict 10, undo log", dict_cases(10, tg.UndoLogFork()), 2000),
            ("dict 1,000, undo log", dict_cases(1000, tg.UndoLogFork()), 20),
        ]
        sqlite, conn = sqlite_cases(Path(tmp))
        environments.append(("SQLite 1,000, savepoint", sqlite, 500))
        unguarded, conn2 = sqlite_cases(Path(tmp), guard_transactions=False)
        environments.append(("SQLite, no COMMIT guard", unguarded, 500))
        for label, cases, n in environments:
            samples = interleaved(cases, rounds=rounds, n=max(1, n // (10 if args.quick else 1)))
            results[label] = summarise(samples)
        conn.close()
        conn2.close()
    print(f"per call, medians over {rounds} interleaved rounds (tracing off)\n")
    print(f"{'environment':24} {'tool':>12} {'guard':>12} {'+dry run':>12} {'dry run adds':>13}"
          f" {'strategy':>13} {'adds/tool':>10}")  # fmt: skip
    for label, r in results.items():
        print(
            f"{label:24} {us(r['tool_us'] / 1e6)} {us(r['guard_us'] / 1e6)} "
            f"{us(r['guard_dry_run_us'] / 1e6)} {us(r['dry_run_added_us'] / 1e6)}  "
            f"{us(r['fork_discard_us'] / 1e6)} {r['dry_run_over_tool']:9.1f}x"
        )
    # The target: a dry run costs less than the environment's own execution.
    targets = {}
    for label, r in results.items():
        targets[f"{label}: the dry run costs less than the tool's own execution"] = (
            r["dry_run_over_tool"] < 1
        )
    print_targets(targets)
    write_json(args.json, {"rounds": rounds, "results": results, "targets": targets})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
