"""Rejections as exceptions (direct calls) or values (dispatch); tool exceptions; error results;
postconditions."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from opentelemetry.trace import StatusCode

import toolguard as tg


class Inventory:
    def __init__(self) -> None:
        self.stock = {"apple": 3}


def build(otel, **options):
    inv = Inventory()
    guard = otel.guard(state=inv, **options)

    @guard.tool(
        preconditions=[
            tg.Precondition(
                "in_stock",
                lambda state, item, qty: state.stock.get(item, 0) >= qty,
                "not enough stock",
            )
        ]
    )
    def take(item: str, qty: int = 1) -> int:
        inv.stock[item] -= qty
        return inv.stock[item]

    return inv, guard, take


def test_raise_mode_carries_everything(otel):
    inv, _, take = build(otel)
    with otel.trajectory("t"):
        take("apple")
        with pytest.raises(tg.ToolCallRejected) as info:
            take("apple", 5)
    exc = info.value
    assert isinstance(exc, tg.ToolGuardError)
    assert exc.tool == "take"
    assert exc.step == 2
    assert exc.cause == "precondition"
    assert exc.check == "precondition.in_stock"
    assert exc.failed_checks == ("precondition.in_stock",)
    assert isinstance(exc.rejection, tg.Rejection) and exc.rejection.step == 2
    assert "not enough stock" in exc.message
    assert "item='apple'" in exc.message and "qty=5" in exc.message
    assert "in_stock" in exc.model_message
    assert "Change the arguments" in exc.model_message
    assert "take" in str(exc) and "precondition.in_stock" in str(exc)
    assert inv.stock == {"apple": 2}


def test_dispatch_gives_a_model_facing_rejection(otel):
    inv, guard, _ = build(otel)
    with otel.trajectory("t"):
        result = guard.call("take", {"item": "pear", "qty": 1})
        bad_args = guard.call("take", {"item": "apple", "qty": "lots"})
    assert isinstance(result, tg.Rejection)
    assert (result.tool, result.step, result.cause, result.check) == (
        "take",
        1,
        "precondition",
        "precondition.in_stock",
    )
    assert result.failed_checks == ("precondition.in_stock",)
    text = str(result)
    assert text.startswith("Error: the call to `take` was rejected (precondition).")
    assert result.model_message in text
    assert "not enough stock" in text and "'pear'" in text
    assert "Inventory" not in text  # the state object is not dumped into the prompt
    assert isinstance(bad_args, tg.Rejection)
    assert "Call it again with arguments matching" in str(bad_args)
    assert "take(item: string, qty?: integer)" in str(bad_args)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.cause = "schema"  # type: ignore[misc]
    assert inv.stock == {"apple": 3}


def test_long_values_are_shortened_in_messages(otel):
    _, _, take = build(otel)
    with pytest.raises(tg.ToolCallRejected) as info:
        take("x" * 5000, 1)
    assert len(info.value.model_message) < 600
    assert len(info.value.message) < 600


def test_tool_exception_reraised_in_raise_mode(otel):
    guard = otel.guard()
    err = OSError("disk full")

    @guard.tool
    def write(path: str) -> None:
        raise err

    with otel.trajectory("t"), pytest.raises(OSError) as info:
        write("/tmp/x")
    assert info.value is err
    span = otel.only_call()
    assert span.attributes["toolguard.cause"] == "state_consistency"
    assert span.attributes["toolguard.check"] == "state.exception"
    assert span.attributes["toolguard.decision"] == "allowed"
    assert span.status.status_code is StatusCode.ERROR
    summary = otel.summary("t").attributes
    assert summary["toolguard.trajectory.first_error.cause"] == "state_consistency"
    assert summary["toolguard.trajectory.first_error_depth"] == 1


@pytest.mark.parametrize("mode", ["block", "log"])
def test_tool_exception_returned_by_dispatch(otel, mode):
    guard = otel.guard(mode=mode)

    @guard.tool
    def write(path: str) -> None:
        raise OSError("disk full")

    with otel.trajectory("t"):
        result = guard.call("write", {"path": "/tmp/x"})
    assert isinstance(result, tg.Rejection)
    assert result.cause == "state_consistency"
    assert result.check == "state.exception"
    assert "OSError: disk full" in str(result)
    assert result.step == 1


def test_tool_exception_reraised_on_a_direct_call_in_log_mode(otel):
    guard = otel.guard(mode="log")

    @guard.tool
    def write(path: str) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError):
        write("/tmp/x")
    assert otel.only_call().attributes["toolguard.cause"] == "state_consistency"


def test_base_exceptions_are_never_swallowed_and_count_as_cancelled(otel):
    guard = otel.guard()

    class Stop(BaseException):
        pass

    @guard.tool
    def halt() -> None:
        raise Stop()

    with otel.trajectory("t") as traj:
        with pytest.raises(Stop):
            halt()
        with pytest.raises(Stop):
            guard.call("halt")
    a = otel.call_spans()[0].attributes
    assert a["toolguard.decision"] == "cancelled"
    assert a["toolguard.valid"] is True  # what its checks said; a cancellation is no failure
    assert (traj.length, traj.first_error_depth) == (2, 3)


def test_async_tool_rejection_and_exception_by_dispatch_and_direct_call(otel):
    guard = otel.guard()

    @guard.tool(preconditions=[tg.Precondition("pos", lambda n: n > 0)])
    async def f(n: int) -> int:
        await asyncio.sleep(0)
        if n > 10:
            raise ValueError("too big")
        return n

    async def main():
        with pytest.raises(tg.ToolCallRejected):
            await f(-1)
        with pytest.raises(ValueError, match="too big"):
            await f(11)
        return await f(1), await guard.acall("f", {"n": -1}), await guard.acall("f", {"n": 11})

    ok, rejected, failed = asyncio.run(main())
    assert ok == 1
    assert isinstance(rejected, tg.Rejection) and rejected.check == "precondition.pos"
    assert isinstance(failed, tg.Rejection) and failed.check == "state.exception"


def test_error_result_predicate(otel):
    guard = otel.guard()

    @guard.tool(error_result=lambda r: isinstance(r, str) and r.startswith("Error:"))
    def lookup(key: str) -> str:
        return "Error: no such key" if key == "missing" else f"value of {key}"

    with otel.trajectory("t"):
        assert lookup("a") == "value of a"
        assert lookup("missing") == "Error: no such key"  # the agent reads the tool's answer
    ok, bad = otel.call_spans("t")
    assert ok.attributes["toolguard.valid"] is True
    a = bad.attributes
    assert a["toolguard.valid"] is False
    assert a["toolguard.cause"] == "state_consistency"
    assert a["toolguard.check"] == "state.error_result"
    assert a["toolguard.decision"] == "allowed"
    assert a["toolguard.message"] == "the environment rejected the call (an error result)"
    assert bad.status.status_code is StatusCode.ERROR
    s = otel.summary("t").attributes
    assert s["toolguard.trajectory.first_error_depth"] == 2


def test_postconditions(otel):
    inv = Inventory()
    guard = otel.guard(state=inv)

    @guard.tool(
        postconditions=[
            tg.Postcondition(
                "stock_not_negative",
                lambda state, item: state.stock[item] >= 0,
                "stock went negative",
            ),
            tg.Postcondition(
                "returns_stock", lambda state, item, result: result == state.stock[item]
            ),
        ]
    )
    def take(item: str, qty: int) -> int:
        inv.stock[item] -= qty
        return inv.stock[item] + 1  # a bug: off by one

    with otel.trajectory("t"):
        assert take("apple", 5) == -1  # ran; the postconditions flag it afterwards
    a = otel.only_call().attributes
    assert a["toolguard.cause"] == "state_consistency"
    assert a["toolguard.check"] == "postcondition.stock_not_negative"
    assert a["toolguard.failed_checks"] == (
        "postcondition.stock_not_negative",
        "postcondition.returns_stock",
    )
    assert "stock went negative" in a["toolguard.message"]
    assert a["toolguard.decision"] == "allowed"
    assert a["error.type"] == "toolguard.state_consistency"
    assert otel.only_call().status.status_code is StatusCode.ERROR


def test_postcondition_that_holds(otel):
    guard = otel.guard()

    @guard.tool(
        postconditions=[
            tg.Postcondition("even", lambda result, args: result % 2 == 0 and args == {"n": 2})
        ]
    )
    def double(n: int) -> int:
        return n * 2

    assert double(2) == 4
    assert otel.only_call().attributes["toolguard.valid"] is True


def test_a_rejection_says_whether_the_call_ran(otel) -> None:
    guard = otel.guard()

    @guard.tool
    def boom(x: int) -> int:
        raise RuntimeError("backend down")

    with otel.trajectory("ran"):
        blocked = guard.call("boom", {"x": "nope"})
        ran = guard.call("boom", {"x": 1})
    assert (blocked.decision, blocked.executed) == ("blocked", False)
    assert (ran.decision, ran.executed, ran.cause) == ("allowed", True, "state_consistency")


def test_an_error_mapping_is_an_environment_rejection_by_default(otel) -> None:
    guard = otel.guard()

    @guard.tool
    def pay(amount: int) -> dict:
        return {"error": "card declined"} if amount > 100 else {"error": None, "paid": amount}

    @guard.tool(error_result=False)  # this tool's "error" key is data, not a failure
    def report(kind: str) -> dict:
        return {"error": "count of errors: 3"}

    with otel.trajectory("t") as traj:
        assert guard.call("pay", {"amount": 5}) == {"error": None, "paid": 5}
        assert guard.call("pay", {"amount": 500}) == {"error": "card declined"}
        assert guard.call("report", {"kind": "x"}) == {"error": "count of errors: 3"}
    first, second, third = traj.verdicts
    assert first.valid and third.valid
    assert (second.valid, second.check, second.decision) == (False, "state.error_result", "allowed")
    assert traj.first_error_depth == 2


def test_the_guard_wide_error_result_can_be_replaced_or_turned_off(otel) -> None:
    for detector, answer, valid in (
        (None, {"error": "ignored"}, True),
        (lambda r: r.startswith("ERR"), "ERR: nope", False),
    ):
        guard = otel.guard(error_result=detector)
        guard.register(lambda answer=answer: answer, name="f")

        with otel.trajectory() as traj:
            guard.call("f")
        assert traj.verdicts[0].valid is valid
