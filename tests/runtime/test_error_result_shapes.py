"""Which results the default ``error_result`` reads as the environment's rejection, whatever
their shape: the guard decides a plain dict, a list or a text without asking the judge, and
these pin that it decides them as the judge would (and asks it whenever the contract has
more to say: its own rule, the guard's, postconditions)."""

from __future__ import annotations

from collections import UserDict
from typing import Any

import pytest

import toolguard as tg

RESULTS: dict[str, Any] = {
    "a dict": {"status": "ok"},
    "a dict with an empty error": {"error": ""},
    "a list of records": [{"id": "c-1"}, {"error": "a record's own field"}],
    "a tuple": ("a", "b"),
    "a text": "error: the text says so, but it is no mapping",
    "bytes": b"error",
    "a number": 3,
    "a flag": False,
    "None": None,
}


def _tool(result: Any, **options: Any) -> tuple[tg.Guard, Any]:
    guard = tg.Guard(**options.pop("guard", {}))

    def answer() -> Any:
        return result

    return guard, guard.register(answer, **options)


def _decision(guard: tg.Guard, fn: Any) -> str:
    with guard.trajectory() as traj:
        fn()
    (verdict,) = traj.verdicts
    return verdict.decision if verdict.ok else f"{verdict.decision}: {verdict.check}"


@pytest.mark.parametrize("shape", list(RESULTS))
def test_no_result_but_a_mapping_with_an_error_is_a_rejection_by_default(shape: str) -> None:
    guard, fn = _tool(RESULTS[shape])
    assert _decision(guard, fn) == "allowed"


@pytest.mark.parametrize("result", [{"error": "no such account"}, UserDict(error="down")])
def test_a_mapping_with_an_error_is_the_environments_rejection(result: Any) -> None:
    guard, fn = _tool(result)
    assert _decision(guard, fn) == "allowed: state.error_result"


@pytest.mark.parametrize("shape", ["a list of records", "a text", "None"])
def test_the_guards_own_rule_still_reads_any_shape(shape: str) -> None:
    guard, fn = _tool(RESULTS[shape], guard={"error_result": lambda result: True})
    assert _decision(guard, fn) == "allowed: state.error_result"


@pytest.mark.parametrize("shape", ["a list of records", "a text", "None"])
def test_the_tools_own_rule_still_reads_any_shape(shape: str) -> None:
    guard, fn = _tool(RESULTS[shape], error_result=lambda result: True)
    assert _decision(guard, fn) == "allowed: state.error_result"


@pytest.mark.parametrize("shape", ["a list of records", "a text", "None"])
def test_a_postcondition_is_still_checked_on_any_shape(shape: str) -> None:
    never = tg.Postcondition("never", lambda result: False, "never holds")
    guard, fn = _tool(RESULTS[shape], postconditions=[never])
    assert _decision(guard, fn) == "allowed: postcondition.never"
