"""One process of a multi-process store scenario: ``python store_worker.py SCENARIO ARGS...``.

Each scenario guards its tools with ``Guard(store=URL)``, writes its spans to its own file
(when given one) and prints one JSON line: what the test checks.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

import toolguard as tg

PHONE = "+1-555-0199"
CONTACT_ID = "id_8923"


def contacts_guard(url: str) -> tuple[tg.Guard, dict[str, dict[str, str]]]:
    db = {CONTACT_ID: {"id": CONTACT_ID, "name": "Alex", "phone": PHONE}}
    guard = tg.Guard(store=url, state=db)

    @guard.tool(produces={"id": "contact_id"})
    def search_contact(phone: str) -> list[dict[str, str]]:
        return [c for c in db.values() if c["phone"] == phone]

    @guard.tool(
        refs={"contact_id": "contact_id"},
        invalidates={"contact_id": "contact_id"},
        preconditions=[
            tg.Precondition(
                "contact_exists",
                lambda state, contact_id: contact_id in state,
                "the contact must exist",
            )
        ],
    )
    def remove_contact(contact_id: str) -> dict[str, str]:
        del db[contact_id]
        return {"removed": contact_id}

    return guard, db


def contact(part: str, url: str, spans: str, traj_id: str) -> dict[str, Any]:
    """The paper's trajectory A split in two: this process's part of it."""
    provider = tg.setup_file_export(spans)
    guard, _ = contacts_guard(url)
    out: list[Any] = []
    labels = {"model": "m", "method": "react"}
    # The first process serves part of the episode; the second ends it (writes the summary).
    with guard.trajectory(traj_id, labels=labels, summary=part == "second") as traj:
        if part == "first":
            out.append(guard.call("remove_contact", {"contact_id": PHONE}))
            out.append(guard.call("search_contact", {"phone": PHONE}))
        else:
            out.append(guard.call("remove_contact", {"contact_id": CONTACT_ID}))
            traj.success = True
    provider.force_flush()
    provider.shutdown()
    return {
        "results": [{"rejected": r.check} if isinstance(r, tg.Rejection) else r for r in out],
        "verdicts": [(v.step, v.decision, v.cause) for v in traj.verdicts],
        "length": traj.length,
        "fed": traj.first_error_depth,
    }


def hammer(url: str, traj_id: str, proc: int, procs: int, threads: int, calls: int):
    """``threads`` threads each making ``calls`` calls of one trajectory, in two phases:
    ``create`` binds a new id; then, once the test says every process has created its ids
    (a line on stdin), ``use`` refers to an id another process created."""
    guard = tg.Guard(store=url)

    @guard.tool(produces={"id": "item"})
    def create(name: str) -> dict[str, str]:
        return {"id": name}

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id

    traj = guard.trajectory(traj_id, summary=False)
    traj.start()
    lock = threading.Lock()

    def phase(name: str) -> list[tuple[int | None, str, str | None]]:
        start = threading.Barrier(threads)
        steps: list[tuple[int | None, str, str | None]] = []

        def work(t: int) -> None:
            start.wait()
            for i in range(calls):
                if name == "create":
                    args = {"name": f"p{proc}-t{t}-{i}"}
                else:  # an id the next process made in the create phase
                    args = {"item_id": f"p{(proc + 1) % procs}-t{t}-{i}"}
                pending = guard.check(name, args, trajectory=traj)
                if pending.rejection is None:
                    pending.finish({"id": args["name"]} if name == "create" else args["item_id"])
                verdict = pending.verdict
                assert verdict is not None
                with lock:
                    steps.append((verdict.step, verdict.decision, verdict.cause))

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return steps

    created = phase("create")
    guard.store.lanes.settle_all()  # every posted finish has landed: then say so
    print(json.dumps({"created": created}), flush=True)
    assert sys.stdin.readline().strip() == "use"
    used = phase("use")
    traj.end()
    return {"used": used}


def relay(role: str, url: str, traj_id: str, n: int) -> dict[str, Any]:
    """``make``: ``n`` calls that each bind an id, each followed at once by the id on stdout;
    ``use``: a call using each id read from stdin (it was bound in the other process)."""
    guard = tg.Guard(store=url)

    @guard.tool(produces={"id": "item"})
    def create(name: str) -> dict[str, str]:
        return {"id": name}

    @guard.tool(refs={"item_id": "item"})
    def use(item_id: str) -> str:
        return item_id

    traj = guard.trajectory(traj_id, summary=role == "use")
    with traj:
        if role == "make":
            for i in range(n):
                guard.call("create", {"name": f"r{i}"}, trajectory=traj)
                sys.stdout.write(f"r{i}\n")
                sys.stdout.flush()
        else:
            for _ in range(n):  # the other process's last line is its own result
                guard.call("use", {"item_id": sys.stdin.readline().strip()}, trajectory=traj)
    verdicts = [(v.step, v.decision, v.cause) for v in traj.verdicts]
    return {"verdicts": verdicts if role == "use" else []}


def die(url: str, traj_id: str) -> None:
    """A process that dies in the middle of a call that binds: its step stays pending."""
    guard = tg.Guard(store=url)

    @guard.tool(produces={"id": "item"})
    def create(name: str) -> dict[str, str]:
        sys.stdout.flush()
        os._exit(3)  # no finish, no end, no atexit: as a process killed mid-call

    traj = guard.trajectory(traj_id, summary=False)
    traj.start()
    guard.call("create", {"name": "never"}, trajectory=traj)


def main(argv: list[str]) -> None:
    scenario = argv[0]
    if scenario == "contact":
        result = contact(*argv[1:5])
    elif scenario == "hammer":
        url, traj_id = argv[1:3]
        proc, procs, threads, calls = (int(a) for a in argv[3:7])
        result = hammer(url, traj_id, proc, procs, threads, calls)
    elif scenario == "relay":
        result = relay(argv[1], argv[2], argv[3], int(argv[4]))
    elif scenario == "die":
        die(argv[1], argv[2])
        raise SystemExit("the call returned: the process was to die in it")
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
