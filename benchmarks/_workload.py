"""The guarded workload the benchmarks share: one tool with three arguments in three shapes.

- ``schema only``: the arguments validated, nothing else declared;
- ``workload``: also one bound-variable argument (`account_id` must have been produced or
  bound earlier in the trajectory) and one precondition over the application state (the
  account is open);
- ``workload + produces``: also ``produces={"receipt_id": "receipt"}``, a key name found in
  the result, the way the README's quickstart declares its search tool.

The growth benchmark's tool declares every check kind, including a grounded free-text
argument that quotes an earlier result (``growth_tool``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

import toolguard as tg

ACCOUNT = "acc-7"
ARGS: dict[str, Any] = {"account_id": ACCOUNT, "amount": 12.5, "memo": "rent"}
CLOSED_ARGS: dict[str, Any] = {"account_id": "acc-closed", "amount": 12.5, "memo": "rent"}
SHAPES = ("schema only", "workload", "workload + produces")
USER_INPUT = f"Please pay the rent from {ACCOUNT} and quote the receipt in the next memo."


class Bank:
    def __init__(self) -> None:
        self.accounts = {ACCOUNT, "acc-8"}


def transfer(account_id: str, amount: float, memo: str) -> dict[str, Any]:
    return {"status": "ok", "receipt_id": "r-1", "account_id": account_id, "amount": amount}


async def atransfer(account_id: str, amount: float, memo: str) -> dict[str, Any]:
    return {"status": "ok", "receipt_id": "r-1", "account_id": account_id, "amount": amount}


def account_open(state: Bank, account_id: str) -> bool:
    return account_id in state.accounts


def tool_options(shape: str = "workload") -> dict[str, Any]:
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}")
    if shape == "schema only":
        return {}
    options: dict[str, Any] = {
        "refs": {"account_id": "account_id"},
        "preconditions": [tg.Precondition("account_open", account_open, "the account is open")],
    }
    if shape == "workload + produces":
        options["produces"] = {"receipt_id": "receipt"}
    return options


def receipts() -> Callable[..., dict[str, Any]]:
    """A transfer whose result holds a new receipt id on every call (no_span_lost's second
    tool, which produces a value)."""
    counter = itertools.count()

    def transfer_with_receipt(account_id: str, amount: float, memo: str) -> dict[str, Any]:
        return {"status": "ok", "receipt_id": f"r-{next(counter)}", "amount": amount}

    return transfer_with_receipt


def _receipts_in(text: str) -> list[str]:
    return re.findall(r"receipt (r-\d+) issued", text)


def growth_tool() -> tuple[Callable[..., str], dict[str, Any], Callable[[], None]]:
    """A payment tool declaring every check kind: schema, a reference (dependency), a
    precondition, a postcondition and the environment's error results (state consistency),
    and ``memo`` grounded (information). It answers in free text ("... receipt r-17 ...")
    and produces the receipt from it, so each call adds a binding and a text the next memo
    may quote. Returns the function, its options and a reset of its receipt counter."""
    count = [0]

    def pay(account_id: str, amount: float, memo: str) -> str:
        n = count[0]
        count[0] += 1
        return f"Paid {amount:.2f} from {account_id} ({memo}); receipt r-{n} issued."

    def reset() -> None:
        count[0] = 0

    options = {
        **tool_options("workload"),
        "produces": {_receipts_in: "receipt"},
        "postconditions": [tg.Postcondition("paid", lambda result: result.startswith("Paid"))],
        "grounded": ["memo"],
    }
    return pay, options, reset


# The realistic tool (issue 28): a search answering a list of 20 records, each record's id a
# value later calls may refer to; a reference and a precondition as the workload's.
SEARCH_ARGS: dict[str, Any] = {"account_id": ACCOUNT, "query": "smith"}
_CONTACTS = [
    {"id": f"c-{i}", "name": f"Smith {i}", "email": f"smith{i}@example.com", "score": i / 20}
    for i in range(20)
]


def search_contacts(account_id: str, query: str) -> list[dict[str, Any]]:
    return _CONTACTS


def search_options() -> dict[str, Any]:
    return {**tool_options("workload"), "produces": {"id": "contact"}}


# `transfer` declared the way the Agents SDK and MCP adapters declare a tool: by the JSON
# Schema the model was shown (what pydantic makes of its annotations, without titles).
TRANSFER_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "account_id": {"type": "string"},
        "amount": {"type": "number"},
        "memo": {"type": "string"},
    },
    "required": ["account_id", "amount", "memo"],
    "additionalProperties": False,
}
