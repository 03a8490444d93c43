"""The guarded workload the benchmarks share: one tool with three arguments, one
bound-variable argument (`account_id` must have been produced or bound earlier in the
trajectory) and one precondition over the application state (the account is open)."""

from __future__ import annotations

import itertools
from typing import Any

import toolguard as tg

ACCOUNT = "acc-7"
ARGS: dict[str, Any] = {"account_id": ACCOUNT, "amount": 12.5, "memo": "rent"}
CLOSED_ARGS: dict[str, Any] = {"account_id": "acc-closed", "amount": 12.5, "memo": "rent"}


class Bank:
    def __init__(self) -> None:
        self.accounts = {ACCOUNT, "acc-8"}


def transfer(account_id: str, amount: float, memo: str) -> dict[str, Any]:
    return {"status": "ok", "account_id": account_id, "amount": amount}


async def atransfer(account_id: str, amount: float, memo: str) -> dict[str, Any]:
    return {"status": "ok", "account_id": account_id, "amount": amount}


def account_open(state: Bank, account_id: str) -> bool:
    return account_id in state.accounts


def tool_options() -> dict[str, Any]:
    return {
        "refs": {"account_id": "account_id"},
        "preconditions": [tg.Precondition("account_open", account_open, "the account is open")],
    }


def receipts() -> Any:
    """A result that produces a new bound value on every call, so the trajectory's state
    grows with its length (what the growth benchmark needs)."""
    counter = itertools.count()

    def transfer_with_receipt(account_id: str, amount: float, memo: str) -> dict[str, Any]:
        return {"status": "ok", "receipt_id": f"r-{next(counter)}", "amount": amount}

    return transfer_with_receipt
