"""The five causes, their precedence, block vs log, decisions and span status."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import toolguard as tg

CAUSE_ORDER = ["schema", "dependency", "precondition", "state_consistency", "information"]


class DB:
    def __init__(self) -> None:
        self.contacts = {"id_1": "Ann"}
        self.sent: list[tuple[str, str]] = []


def make_send(guard: tg.Guard, db: DB, **extra: Any):
    @guard.tool(
        refs={"contact_id": "contact_id"},
        preconditions=[
            tg.Precondition(
                "contact_exists",
                lambda state, contact_id: contact_id in state.contacts,
                "the contact must exist",
            ),
            tg.Precondition("short_text", lambda text: len(text) < 20, "text must be short"),
        ],
        grounded=["text"],
        error_result=lambda r: isinstance(r, dict) and "error" in r,
        **extra,
    )
    def send(contact_id: str, text: str, count: int = 1) -> dict:
        db.sent.append((contact_id, text))
        if contact_id not in db.contacts:
            return {"error": "no such contact"}
        return {"ok": True}

    return send


# -- each cause on its own -----------------------------------------------------------------


def test_valid_call_span_contract(otel):
    db = DB()
    guard = otel.guard(state=db)
    send = make_send(guard, db)
    with otel.trajectory("t", user_input="say hello") as traj:
        traj.bind("contact_id", "id_1")
        assert send("id_1", "hello") == {"ok": True}
    span = otel.call_spans("t")[0]
    assert span.name == "execute_tool send"
    assert span.kind is SpanKind.INTERNAL
    a = span.attributes
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.tool.name"] == "send"
    assert a["gen_ai.tool.type"] == "function"
    assert a["toolguard.trajectory.id"] == "t"
    assert a["toolguard.step"] == 1
    assert a["toolguard.valid"] is True
    assert a["toolguard.decision"] == "allowed"
    for key in (
        "toolguard.cause",
        "toolguard.check",
        "toolguard.message",
        "toolguard.failed_checks",
        "error.type",
    ):
        assert key not in a
    assert span.status.status_code is StatusCode.UNSET


def _single_failure(otel, call, expect_cause, expect_check, *, executed):
    db = DB()
    guard = otel.guard(state=db)
    send = make_send(guard, db)
    with otel.trajectory("t", user_input="say hello") as traj:
        traj.bind("contact_id", "id_1")
        traj.bind("contact_id", "id_2")  # bound, but not in the db: precondition territory
        with pytest.raises(tg.ToolCallRejected) if not executed else _nullcontext() as info:
            call(send)
    span = otel.only_call()
    a = span.attributes
    assert a["toolguard.valid"] is False
    assert a["toolguard.cause"] == expect_cause
    assert a["toolguard.check"] == expect_check
    assert a["error.type"] == f"toolguard.{expect_cause}"
    assert a["toolguard.failed_checks"] == (expect_check,)
    assert a["toolguard.message"]
    assert a["toolguard.decision"] == ("allowed" if executed else "blocked")
    assert span.status.status_code is StatusCode.ERROR
    assert len(db.sent) == (1 if executed else 0)
    summary = otel.summary("t")
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 1
    assert summary.attributes["toolguard.trajectory.first_error.cause"] == expect_cause
    if not executed:
        assert info.value.cause == expect_cause
        assert info.value.check == expect_check


class _nullcontext:
    value = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_schema_cause(otel):
    _single_failure(
        otel, lambda s: s("id_1", "hello", count="many"), "schema", "schema.args", executed=False
    )


def test_schema_missing_argument(otel):
    _single_failure(otel, lambda s: s(contact_id="id_1"), "schema", "schema.args", executed=False)


def test_dependency_cause(otel):
    _single_failure(
        otel, lambda s: s("id_9", "hello"), "dependency", "dependency.contact_id", executed=False
    )


def test_precondition_cause(otel):
    _single_failure(
        otel,
        lambda s: s("id_2", "hello"),
        "precondition",
        "precondition.contact_exists",
        executed=False,
    )


def test_information_cause(otel):
    _single_failure(
        otel, lambda s: s("id_1", "invented"), "information", "information.text", executed=False
    )


def test_information_placeholder(otel):
    _single_failure(
        otel, lambda s: s("id_1", "<unknown>"), "information", "information.text", executed=False
    )


def test_state_consistency_cause_error_result(otel):
    guard = otel.guard()

    @guard.tool(error_result=lambda r: isinstance(r, dict) and "error" in r)
    def remove(contact_id: str) -> dict:
        return {"error": f"{contact_id} not found"}

    assert remove("x") == {"error": "x not found"}  # the result is handed back unchanged
    span = otel.only_call()
    a = span.attributes
    assert a["toolguard.valid"] is False
    assert a["toolguard.cause"] == "state_consistency"
    assert a["toolguard.check"] == "state.error_result"
    assert a["error.type"] == "toolguard.state_consistency"
    assert a["toolguard.decision"] == "allowed"  # executed; the environment rejected it
    assert span.status.status_code is StatusCode.ERROR


def test_state_consistency_cause_exception(otel):
    guard = otel.guard()

    @guard.tool
    def boom(x: int) -> int:
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        boom(1)
    a = otel.only_call().attributes
    assert a["toolguard.cause"] == "state_consistency"
    assert a["toolguard.check"] == "state.exception"
    assert a["toolguard.decision"] == "allowed"
    assert "RuntimeError" in a["toolguard.message"]
    assert otel.only_call().status.status_code is StatusCode.ERROR


# -- precedence -----------------------------------------------------------------------------


def _all_five(otel, mode):
    """A call that fails schema, dependency, precondition, state and information at once."""
    db = DB()
    guard = otel.guard(state=db, mode=mode)
    send = make_send(guard, db)
    with otel.trajectory("t", user_input="hi") as traj:
        traj.bind("contact_id", "id_1")
        result = None
        try:
            result = send("id_9", "a text far too long to pass", count="many")
        except tg.ToolCallRejected as exc:
            result = exc
    return db, result, otel.only_call()


def test_block_stops_at_first_failure(otel):
    db, result, span = _all_five(otel, "block")
    assert isinstance(result, tg.ToolCallRejected)
    assert result.cause == "schema"
    assert result.failed_checks == ("schema.args",)
    assert span.attributes["toolguard.failed_checks"] == ("schema.args",)
    assert span.attributes["toolguard.decision"] == "blocked"
    assert db.sent == []


def test_log_runs_every_check_in_precedence_order(otel):
    db, result, span = _all_five(otel, "log")
    assert result == {"error": "no such contact"}  # it ran
    assert db.sent == [("id_9", "a text far too long to pass")]
    a = span.attributes
    assert a["toolguard.decision"] == "logged"
    assert a["toolguard.cause"] == "schema"
    assert a["toolguard.check"] == "schema.args"
    assert a["toolguard.failed_checks"] == (
        "schema.args",
        "dependency.contact_id",
        "precondition.contact_exists",
        "precondition.short_text",
        "state.error_result",
        "information.text",
    )
    assert span.status.status_code is StatusCode.ERROR  # the environment rejected it


def test_block_stops_at_first_precondition(otel):
    db = DB()
    guard = otel.guard(state=db)
    send = make_send(guard, db)
    with otel.trajectory("t", user_input="a text far too long to pass") as traj:
        traj.bind("contact_id", "id_2")
        with pytest.raises(tg.ToolCallRejected) as info:
            send("id_2", "a text far too long to pass")
    assert info.value.failed_checks == ("precondition.contact_exists",)


def test_block_stops_at_first_dependency(otel):
    guard = otel.guard()

    @guard.tool(refs={"a": "kind_a", "b": "kind_b"})
    def pair(a: str, b: str) -> None:
        return None

    with otel.trajectory("t"), pytest.raises(tg.ToolCallRejected) as info:
        pair("x", "y")
    assert info.value.failed_checks == ("dependency.a",)
    assert otel.only_call().attributes["toolguard.failed_checks"] == ("dependency.a",)


def test_block_stops_at_first_grounded_argument(otel):
    guard = otel.guard()

    @guard.tool(grounded=["a", "b"])
    def pair(a: str, b: str) -> None:
        return None

    with otel.trajectory("t", user_input="nothing"), pytest.raises(tg.ToolCallRejected) as info:
        pair("made-up", "also-made-up")
    assert info.value.failed_checks == ("information.a",)


def test_log_lists_every_failed_dependency(otel):
    guard = otel.guard(mode="log")

    @guard.tool(refs={"a": "kind_a", "b": "kind_b"})
    def pair(a: str, b: str) -> str:
        return a + b

    with otel.trajectory("t"):
        assert pair("x", "y") == "xy"
    assert otel.only_call().attributes["toolguard.failed_checks"] == (
        "dependency.a",
        "dependency.b",
    )


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # (args, kwargs) -> failed checks in log mode
        (
            (("id_9", "hi"), {}),
            ["dependency.contact_id", "precondition.contact_exists", "state.error_result"],
        ),
        (
            (("id_2", "hi there friend, a long one"), {}),
            ["precondition.contact_exists", "precondition.short_text", "state.error_result"],
        ),
        ((("id_1", "invented"), {}), ["information.text"]),
        (
            (("id_9", "invented"), {}),
            [
                "dependency.contact_id",
                "precondition.contact_exists",
                "state.error_result",
                "information.text",
            ],
        ),
    ],
)
def test_log_mode_failed_checks_are_in_precedence_order(otel, call, expected):
    db = DB()
    guard = otel.guard(state=db, mode="log")
    send = make_send(guard, db)
    args, kwargs = call
    with otel.trajectory("t", user_input="hi there friend, a long one") as traj:
        traj.bind("contact_id", "id_1")
        traj.bind("contact_id", "id_2")
        send(*args, **kwargs)
    checks = list(otel.only_call().attributes["toolguard.failed_checks"])
    assert checks == expected
    ranks = [CAUSE_ORDER.index(_cause_of(c)) for c in checks]
    assert ranks == sorted(ranks)


def _cause_of(check: str) -> str:
    prefix = check.split(".")[0]
    return {
        "schema": "schema",
        "dependency": "dependency",
        "precondition": "precondition",
        "state": "state_consistency",
        "postcondition": "state_consistency",
        "information": "information",
    }[prefix]


# -- decisions and status -------------------------------------------------------------------


def test_logged_without_tool_failure_has_unset_status(otel):
    guard = otel.guard(mode="log")

    @guard.tool(preconditions=[tg.Precondition("positive", lambda x: x > 0, "x must be > 0")])
    def f(x: int) -> int:
        return x * 2

    assert f(-1) == -2
    span = otel.only_call()
    assert span.attributes["toolguard.decision"] == "logged"
    assert span.attributes["toolguard.valid"] is False
    assert span.attributes["toolguard.cause"] == "precondition"
    assert span.status.status_code is StatusCode.UNSET


def test_blocked_has_error_status_and_does_not_run(otel):
    ran = []
    guard = otel.guard()

    @guard.tool(preconditions=[tg.Precondition("positive", lambda x: x > 0, "x must be > 0")])
    def f(x: int) -> int:
        ran.append(x)
        return x

    with pytest.raises(tg.ToolCallRejected):
        f(-1)
    assert ran == []
    span = otel.only_call()
    assert span.attributes["toolguard.decision"] == "blocked"
    assert span.status.status_code is StatusCode.ERROR


def test_mode_overridable_per_tool(otel):
    guard = otel.guard(mode="block")
    positive = [tg.Precondition("positive", lambda x: x > 0)]

    @guard.tool(preconditions=positive, mode="log")
    def logged(x: int) -> int:
        return x

    @guard.tool(preconditions=positive)
    def blocked(x: int) -> int:
        return x

    assert logged(-1) == -1
    with pytest.raises(tg.ToolCallRejected):
        blocked(-1)
    decisions = {s.name: s.attributes["toolguard.decision"] for s in otel.call_spans()}
    assert decisions == {"execute_tool logged": "logged", "execute_tool blocked": "blocked"}

    guard2 = otel.guard(mode="log")

    @guard2.tool(preconditions=positive, mode="block")
    def strict(x: int) -> int:
        return x

    with pytest.raises(tg.ToolCallRejected):
        strict(-1)


def test_invalid_mode_rejected():
    with pytest.raises(ValueError):
        tg.Guard(mode="warn")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tg.Guard(on_guard_error="shrug")  # type: ignore[arg-type]


def test_blocked_calls_count_in_trajectory_length(otel):
    guard = otel.guard()

    @guard.tool(preconditions=[tg.Precondition("positive", lambda x: x > 0)])
    def f(x: int) -> int:
        return x

    with otel.trajectory("t") as traj:
        assert f(1) == 1
        assert isinstance(guard.call("f", {"x": -1}), tg.Rejection)
        assert f(2) == 2
        with pytest.raises(tg.ToolCallRejected):
            f(-2)
    s = otel.summary("t").attributes
    assert s["toolguard.trajectory.length"] == 4
    assert s["toolguard.trajectory.first_error_depth"] == 2
    assert s["toolguard.trajectory.first_error.cause"] == "precondition"
    assert traj.length == 4
    assert [c.attributes["toolguard.step"] for c in otel.call_spans("t")] == [1, 2, 3, 4]
    assert [c.attributes["toolguard.valid"] for c in otel.call_spans("t")] == [
        True,
        False,
        True,
        False,
    ]


def test_log_mode_does_not_count_a_predicate_raising_on_ill_typed_values(otel) -> None:
    import toolguard as tg

    guard = otel.guard(mode="log")

    @guard.tool(preconditions=[tg.Precondition("positive", lambda n: n > 0, "n must be > 0")])
    def root(n: int) -> int:
        return n

    with otel.trajectory("ill-typed"):
        guard.call("root", {"n": "not a number"})
    span = next(s for s in otel.exporter.get_finished_spans() if s.name == "execute_tool root")
    assert span.attributes["toolguard.failed_checks"] == ("schema.args",)
    assert span.attributes["toolguard.decision"] == "logged"


def test_trajectory_keeps_each_calls_verdict_in_process(otel) -> None:
    guard = otel.guard(mode="log")

    @guard.tool(refs={"ref": "ref"})
    def use(ref: str) -> str:
        return ref

    with otel.trajectory("verdicts") as traj:
        guard.call("use", {"ref": "nope"})
        guard.call("missing_tool", {})
    assert [(v.step, v.tool, v.valid, v.decision, v.cause) for v in traj.verdicts] == [
        (1, "use", False, "logged", "dependency"),
        (2, "missing_tool", False, "blocked", "schema"),
    ]
    assert traj.verdicts[0].failed_checks == ("dependency.ref",)
