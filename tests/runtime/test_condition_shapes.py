"""A precondition's predicate, whatever its shape, sees the same values and fails the same way.

The condition stage calls a plain function of one or two parameters positionally (no mapping
built for ``**``) and every other predicate by keyword: these pin that the two agree on what
the predicate is given, what the failure says, and how a predicate that raises fails.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

import toolguard as tg


class Bank:
    def __init__(self) -> None:
        self.open = {"acc-1"}


def _wraps(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:  # keywords only: a positional call would not bind
        return fn(**kwargs)

    return wrapper


class _IsOpen:
    def __call__(self, state: Bank, account_id: str) -> bool:
        return account_id in state.open


def _state_first(state: Bank, account_id: str) -> bool:
    return account_id in state.open


def _state_last(account_id: str, guard_state: Bank) -> bool:
    return account_id in guard_state.open


def _keyword_only(state: Bank, *, account_id: str) -> bool:
    return account_id in state.open


def _three(state: Bank, account_id: str, amount: float) -> bool:
    return account_id in state.open and amount > 0


def _arg_only(account_id: str) -> bool:
    return account_id.startswith("acc-") and account_id != "acc-2"


def _defaulted(account_id: str, state: Bank | None = None) -> bool:
    return state is not None and account_id in state.open


PREDICATES: dict[str, Callable[..., Any]] = {
    "state first": _state_first,
    "state last": _state_last,
    "keyword-only": _keyword_only,
    "three parameters": _three,
    "wrapped by functools.wraps": _wraps(_state_first),
    "a callable object": _IsOpen(),
    "a lambda": lambda state, account_id: account_id in state.open,
    "a defaulted parameter": _defaulted,
}


def _transfer_with(predicate: Callable[..., Any]) -> Callable[..., Any]:
    guard = tg.Guard(state=Bank())

    def transfer(account_id: str, amount: float) -> dict[str, Any]:
        return {"status": "ok"}

    return guard.register(
        transfer, preconditions=[tg.Precondition("open", predicate, "the account is open")]
    )


@pytest.mark.parametrize("shape", list(PREDICATES))
def test_a_predicate_of_any_shape_admits_what_holds_and_blocks_what_does_not(shape: str) -> None:
    transfer = _transfer_with(PREDICATES[shape])
    assert transfer("acc-1", 5.0) == {"status": "ok"}
    with pytest.raises(tg.ToolCallRejected) as caught:
        transfer("acc-2", 5.0)
    failure = caught.value.rejection
    assert failure.failed_checks == ("precondition.open",)
    assert failure.check == "precondition.open"
    # The values it was given, in its parameters' order, the state left out.
    shown = "amount=5.0" if shape == "three parameters" else ""
    expected = ", ".join(part for part in ("account_id='acc-2'", shown) if part)
    assert failure.message == f"precondition.open failed: the account is open ({expected})"


def test_a_one_parameter_predicate_is_given_its_argument() -> None:
    transfer = _transfer_with(_arg_only)
    assert transfer("acc-1", 5.0) == {"status": "ok"}
    with pytest.raises(tg.ToolCallRejected) as caught:
        transfer("acc-2", 5.0)
    failure = caught.value.rejection
    assert failure.failed_checks == ("precondition.open",)
    assert failure.message == "precondition.open failed: the account is open (account_id='acc-2')"


@pytest.mark.parametrize("positional", [True, False])
def test_a_predicate_that_raises_fails_closed_either_way(positional: bool) -> None:
    def boom(state: Bank, account_id: str) -> bool:
        raise RuntimeError("the bank is down")

    transfer = _transfer_with(boom if positional else _wraps(boom))
    with pytest.raises(tg.ToolCallRejected) as caught:
        transfer("acc-1", 5.0)
    failure = caught.value.rejection
    assert failure.failed_checks == ("precondition.open",)
    assert failure.check == "precondition.open"
    assert "RuntimeError" in failure.message
