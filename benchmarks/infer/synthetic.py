"""Synthetic recorded runs for the cost of ``toolguard infer``: OpenAI chat logs of a small
ticketing app, written one run a line without holding the file.

Each run: a user message naming a customer (and sometimes a ticket number), then 4 to 16
calls: searches whose results list ticket ids, reads and updates of a found id (or, rarely,
one from nowhere), closures after which the id is read only once a search found it again,
notes with free text, and counts with small numbers. Seeded: the same arguments give the same
bytes. Nothing here is tuned to what inference finds; it only has to look like traffic.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

_NAMES = ("Ann", "Bob", "Carla", "Dmitri", "Eve", "Femi", "Grace", "Hiro", "Ines", "Jon")
_WORDS = ("printer", "refund", "login", "invoice", "upgrade", "crash", "shipping", "password")


def _message(cid: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": cid, "type": "function", "function": {"name": name}}
    call["function"]["arguments"] = json.dumps(arguments)
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _call(
    op: str, name: str, live: list[str], closed: list[str], rng: random.Random
) -> tuple[str, dict[str, Any], Any]:
    if op == "search":
        found = [f"T{rng.randrange(10**6):06d}" for _ in range(rng.randint(0, 4))]
        if closed and rng.random() < 0.2:
            found.append(closed.pop())  # found again: usable again
        live += [f for f in found if f not in live]
        tickets = [{"id": t, "status": "open"} for t in found]
        return (
            "search_tickets",
            {"customer": name, "limit": rng.choice((5, 10, 20))},
            {"tickets": tickets},
        )
    if op in ("get", "update"):
        invented = rng.random() < 0.03
        tid = f"T{rng.randrange(10**6):06d}" if invented else rng.choice(live)
        if op == "get":
            subject = rng.choice(_WORDS)
            return "get_ticket", {"ticket_id": tid}, {"id": tid, "subject": subject}
        return "update_ticket", {"ticket_id": tid, "priority": rng.randint(1, 5)}, {"ok": True}
    if op == "close":
        tid = live.pop(rng.randrange(len(live)))
        closed.append(tid)
        return "close_ticket", {"ticket_id": tid, "reason": rng.choice(_WORDS)}, {"ok": True}
    if op == "note":
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12)))
        return "add_note", {"text": text}, {"note_id": f"N{rng.randrange(10**8)}"}
    return "count_tickets", {"n": rng.randint(0, 50)}, {"count": rng.randint(0, 500)}


def synthetic_run(index: int, rng: random.Random) -> dict[str, Any]:
    name = rng.choice(_NAMES)
    ticket = f"T{rng.randrange(10**6):06d}"
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"I am {name}; my ticket {ticket} is about a problem."}
    ]
    live: list[str] = [ticket]
    closed: list[str] = []
    for k in range(rng.randint(4, 16)):
        op = rng.choice(("search", "search", "get", "update", "close", "note", "count"))
        if op in ("get", "update", "close") and not live:
            op = "count"
        tool, arguments, result = _call(op, name, live, closed, rng)
        cid = f"c{k}"
        messages.append(_message(cid, tool, arguments))
        messages.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(result)})
    return {"id": f"syn{index:06d}", "messages": messages}


def write_synthetic(path: Path, n: int, seed: int = 0) -> int:
    """Write ``n`` runs to ``path`` (JSON Lines); returns the number of calls written."""
    rng = random.Random(seed)
    calls = 0
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            row = synthetic_run(i, rng)
            calls += sum(1 for m in row["messages"] if m["role"] == "tool")
            f.write(json.dumps(row) + "\n")
    return calls
