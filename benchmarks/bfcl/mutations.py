"""Seeded error injection into ground-truth trajectories, one mutation class at a time.

A mutation says where it changed the trajectory; it never says where the trajectory breaks.
That is for the raw-backend replay to find out (a swap often fails later, or not at all).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.bfcl.data import Call, Task
from benchmarks.bfcl.env import Environment

Step = tuple[int, Call]  # (turn index, call with keyword arguments only)

MUTATION_CLASSES = (
    "wrong_id",
    "wrong_type",
    "swap",
    "invented_value",
    "unknown_tool",
    "dropped_prerequisite",
)

# Arguments that name an entity which must already exist in the environment.
ID_ARGS = frozenset(
    {
        "file_name", "folder", "dir_name", "source", "file_name1", "file_name2",
        "user_id", "receiver_id", "user", "ticket_id", "order_id", "tweet_id",
        "booking_id", "card_id", "symbol", "access_token", "username_to_unfollow",
    }
)  # fmt: skip
# ...except where the argument names a new entity: a fresh name there is not a wrong id.
CREATES = frozenset({("mkdir", "dir_name"), ("touch", "file_name")})
# Free values the agent must take from the user or an earlier output (not entity names).
VALUE_ARGS = frozenset(
    {
        "content", "message", "pattern", "keyword", "title", "description",
        "comment_content", "resolution", "name", "amount", "price", "budget_limit",
        "value", "temperature", "fuelAmount", "destination", "travel_date",
    }
)  # fmt: skip
# Calls that set up what later calls rely on (navigation, creation, login, lookups).
PREREQUISITES = frozenset(
    {
        "cd", "mkdir", "touch", "cp", "mv", "echo",
        "message_login", "get_user_id", "add_contact",
        "authenticate_twitter", "post_tweet",
        "ticket_login", "create_ticket",
        "trading_login", "place_order", "add_to_watchlist", "fund_account",
        "authenticate_travel", "register_credit_card", "book_flight",
        "startEngine", "pressBrakePedal", "lockDoors", "fillFuelTank",
    }
)  # fmt: skip
INVENTED_TOOLS = ("list_files", "delete_file", "open_file", "send_email", "get_status")


@dataclass
class Mutation:
    kind: str
    calls: list[Step]
    position: int  # 1-based step where the trajectory was changed
    detail: str


def normalised_calls(task: Task) -> list[Step]:
    """Ground truth with positional arguments bound to names (mutations edit by name)."""
    env = Environment(task)
    return [(turn, Call(c.name, (), env.normalise(c))) for turn, c in task.flat_calls()]


def _with_arg(call: Call, arg: str, value: Any) -> Call:
    return Call(call.name, (), {**call.kwargs, arg: value})


def _missing_like(value: Any, rng: random.Random) -> Any:
    """A value of the same type that names nothing in any BFCL scenario."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return 900_000 + rng.randrange(99_999)
    if isinstance(value, float):
        return value + 0.5 + rng.randrange(1000)
    stem, dot, ext = str(value).rpartition(".")
    tag = f"zz{rng.randrange(10_000):04d}"
    return f"{stem}_{tag}.{ext}" if dot and stem else f"{value}_{tag}"


def _wrong_type(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, int | float):
        return f"n{rng.randrange(100)}"
    if isinstance(value, str):
        return rng.randrange(1, 1000)
    if isinstance(value, list):
        return "item"
    return [value]


def _invented(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return type(value)(value * 7 + 13 + rng.randrange(100))
    return f"invented text {rng.randrange(10_000)}"


def _arg_sites(calls: list[Step], names: frozenset[str] | None) -> list[tuple[int, str]]:
    return [
        (i, k)
        for i, (_, c) in enumerate(calls)
        for k, v in c.kwargs.items()
        if (names is None or (k in names and (c.name, k) not in CREATES)) and v is not None
    ]


def _edit_arg(
    calls: list[Step], rng: random.Random, names: frozenset[str] | None, kind: str,
    change: Callable[[Any, random.Random], Any],
) -> Mutation | None:  # fmt: skip
    sites = _arg_sites(calls, names)
    if not sites:
        return None
    i, arg = rng.choice(sites)
    turn, call = calls[i]
    new = change(call.kwargs[arg], rng)
    out = list(calls)
    out[i] = (turn, _with_arg(call, arg, new))
    return Mutation(kind, out, i + 1, f"{call.name}.{arg}: {call.kwargs[arg]!r} -> {new!r}")


def mutate(task: Task, kind: str, seed: int) -> Mutation | None:
    """One mutation of ``kind`` on the task's ground truth; None when nothing fits."""
    rng = random.Random(f"{seed}:{kind}:{task.id}")
    calls = normalised_calls(task)
    if not calls:
        return None
    if kind == "wrong_id":
        return _edit_arg(calls, rng, ID_ARGS, kind, _missing_like)
    if kind == "wrong_type":
        return _edit_arg(calls, rng, None, kind, _wrong_type)
    if kind == "invented_value":
        return _edit_arg(calls, rng, VALUE_ARGS, kind, _invented)
    if kind == "unknown_tool":
        i = rng.randrange(len(calls))
        turn, call = calls[i]
        new_name = rng.choice(INVENTED_TOOLS)
        out = list(calls)
        out[i] = (turn, Call(new_name, (), dict(call.kwargs)))
        return Mutation(kind, out, i + 1, f"{call.name} -> {new_name}")
    if kind == "swap":
        pairs = [i for i in range(len(calls) - 1) if calls[i][1] != calls[i + 1][1]]
        if not pairs:
            return None
        i = rng.choice(pairs)
        out = list(calls)
        # Calls trade places; each position keeps its turn (the user's requests don't move).
        out[i], out[i + 1] = (calls[i][0], calls[i + 1][1]), (calls[i + 1][0], calls[i][1])
        return Mutation(kind, out, i + 1, f"{calls[i][1].name} <-> {calls[i + 1][1].name}")
    if kind == "dropped_prerequisite":
        sites = [i for i, (_, c) in enumerate(calls[:-1]) if c.name in PREREQUISITES]
        if not sites:
            return None
        i = rng.choice(sites)
        out = calls[:i] + calls[i + 1 :]
        return Mutation(kind, out, i + 1, f"dropped {calls[i][1].render()}")
    raise ValueError(f"unknown mutation class {kind!r}")
