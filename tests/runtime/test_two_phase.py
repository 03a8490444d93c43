"""Two-phase calls: a framework runs the tool, the guard checks it before and is told after.

Each test drives the public API the way an adapter does and compares with what
``guard.call`` produces for the same calls.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import threading
from typing import Annotated, Any

import pytest

import toolguard as tg

PHONE = "+1-555-0199"
CONTACT_ID = "id_8923"


def contacts_guard(otel, **options: Any) -> tuple[tg.Guard, dict[str, Any]]:
    db = {CONTACT_ID: {"id": CONTACT_ID, "phone": PHONE}}
    guard = otel.guard(state=db, **options)

    @guard.tool(produces={"id": "contact_id"})
    def search_contacts(phone: str) -> list[dict[str, Any]]:
        return [c for c in db.values() if c["phone"] == phone]

    @guard.tool(
        refs={"contact_id": "contact_id"},
        invalidates={"contact_id": "contact_id"},
        preconditions=[tg.Precondition("exists", lambda state, contact_id: contact_id in state)],
    )
    def remove_contact(contact_id: str) -> dict[str, str]:
        del db[contact_id]
        return {"removed": contact_id}

    return guard, db


def comparable(span) -> tuple[str, dict[str, Any], str, Any]:
    return span.name, dict(span.attributes), span.status.status_code.name, span.parent is None


def run_with_call(guard: tg.Guard) -> list[Any]:
    return [
        guard.call("remove_contact", {"contact_id": PHONE}, call_id="c1"),
        guard.call("search_contacts", {"phone": PHONE}, call_id="c2"),
        guard.call("remove_contact", {"contact_id": CONTACT_ID}, call_id="c3"),
    ]


def run_two_phase(guard: tg.Guard, tools: dict[str, Any]) -> list[Any]:
    seen = []
    for name, args, call_id in (
        ("remove_contact", {"contact_id": PHONE}, "c1"),
        ("search_contacts", {"phone": PHONE}, "c2"),
        ("remove_contact", {"contact_id": CONTACT_ID}, "c3"),
    ):
        pending = guard.check(name, args, call_id=call_id)
        if pending.rejection is not None:
            seen.append(pending.rejection)
            continue
        with pending:  # the framework runs the tool however it likes
            result = tools[name](**pending.arguments)
            pending.finish(result)
        seen.append(result)
    return seen


def test_two_phase_gives_the_same_spans_steps_and_verdicts_as_call(otel) -> None:
    guard, _ = contacts_guard(otel)
    with guard.trajectory("via-call") as a:
        by_call = run_with_call(guard)
    call_spans = [comparable(s) for s in otel.spans()]
    otel.clear()

    # A framework owns the functions: the guard knows the same tools by contract alone.
    db = {CONTACT_ID: {"id": CONTACT_ID, "phone": PHONE}}
    framework = otel.guard(state=db)
    framework.declare(
        "search_contacts",
        json_schema={"type": "object", "properties": {"phone": {"type": "string"}}},
        produces={"id": "contact_id"},
    )
    framework.declare(
        "remove_contact",
        json_schema={"type": "object", "properties": {"contact_id": {"type": "string"}}},
        refs={"contact_id": "contact_id"},
        invalidates={"contact_id": "contact_id"},
        preconditions=[tg.Precondition("exists", lambda state, contact_id: contact_id in state)],
    )
    tools = {
        "search_contacts": lambda phone: [c for c in db.values() if c["phone"] == phone],
        "remove_contact": lambda contact_id: {"removed": db.pop(contact_id)["id"]},
    }
    with framework.trajectory("via-call") as b:
        by_check = run_two_phase(framework, tools)

    assert [type(x) for x in by_check] == [type(x) for x in by_call]
    assert by_check[0] == by_call[0]  # the same Rejection, field by field
    assert [comparable(s) for s in otel.spans()] == call_spans
    assert a.verdicts == b.verdicts
    assert (b.length, b.first_error_depth, b.first_error_cause) == (3, 1, "dependency")


def test_two_phase_async_matches_acall(otel) -> None:
    guard = otel.guard()

    @guard.tool(produces={"$": "session"})
    async def open_session(user: str) -> str:
        await asyncio.sleep(0)
        return f"s-{user}"

    @guard.tool(refs={"session": "session"})
    async def query(session: str) -> str:
        await asyncio.sleep(0)
        return "rows"

    async def with_acall() -> list[Any]:
        async with guard.trajectory("t") as traj:
            out = [
                await guard.acall("query", {"session": "s-x"}),
                await guard.acall("open_session", {"user": "x"}),
                await guard.acall("query", {"session": "s-x"}),
            ]
            traj.success = True
        return out

    first = asyncio.run(with_acall())
    spans = [comparable(s) for s in otel.spans()]
    otel.clear()
    assert first[0].cause == "dependency" and first[1:] == ["s-x", "rows"]
    second = asyncio.run(with_check_direct(guard))
    assert [type(x) for x in second] == [type(x) for x in first]
    assert [comparable(s) for s in otel.spans()] == spans


async def with_check_direct(guard: tg.Guard) -> list[Any]:
    """Two-phase over an async function the caller awaits itself."""
    tools = {
        "open_session": guard.get_tool("open_session"),
        "query": guard.get_tool("query"),
    }
    impl = {"open_session": lambda user: f"s-{user}", "query": lambda session: "rows"}
    out: list[Any] = []
    async with guard.trajectory("t") as traj:
        for name, args in (
            ("query", {"session": "s-x"}),
            ("open_session", {"user": "x"}),
            ("query", {"session": "s-x"}),
        ):
            pending = guard.check(name, args)
            if pending.rejection is not None:
                out.append(pending.rejection)
                continue
            async with pending:
                await asyncio.sleep(0)
                result = impl[tools[name].name](**pending.arguments)
                pending.finish(result)
            out.append(result)
        traj.success = True
    return out


def test_a_turn_of_three_calls_finishing_in_reverse_keeps_steps_by_call_id(otel) -> None:
    guard = otel.guard()
    guard.declare("fetch", json_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    with guard.trajectory("turn") as traj:
        first = guard.check("fetch", {"n": 0})  # an earlier turn: step 1
        first.finish(0)
        assert traj.reserve(["call_a", "call_b", "call_c"]) == [2, 3, 4]
        # The framework starts them in another order and finishes them in reverse.
        started = {cid: guard.check("fetch", {"n": i}, call_id=cid)
                   for i, cid in ((3, "call_c"), (1, "call_a"), (2, "call_b"))}  # fmt: skip
        for cid in ("call_c", "call_b", "call_a"):
            started[cid].finish(cid)
        after = guard.check("fetch", {"n": 9}, call_id="unreserved")
        after.finish(9)
    assert {cid: p.step for cid, p in started.items()} == {"call_a": 2, "call_b": 3, "call_c": 4}
    assert after.step == 5 and traj.length == 5
    spans = otel.call_spans("turn")
    by_id = {s.attributes.get("gen_ai.tool.call.id"): s.attributes["toolguard.step"] for s in spans}
    assert by_id == {None: 1, "call_a": 2, "call_b": 3, "call_c": 4, "unreserved": 5}


def test_the_step_argument_is_gone_from_call(otel) -> None:
    guard, _ = contacts_guard(otel)
    with pytest.raises(TypeError):
        guard.call("search_contacts", {"phone": PHONE}, step=2)  # type: ignore[call-arg]


def test_a_trajectory_reached_from_another_thread_and_from_a_hooks_context(otel) -> None:
    guard, _ = contacts_guard(otel)
    traj = guard.trajectory("session-1", key="thread-42").start()
    # A hook that runs in a fresh context (LangGraph's before_agent, a RunHooks callback):
    # the context variable is not visible there, the key is.
    hook_context = contextvars.Context()
    assert hook_context.run(tg.current_trajectory) is None
    found = hook_context.run(guard.find_trajectory, "thread-42")
    assert found is traj

    def hook() -> Any:
        with guard.find_trajectory("thread-42").activate():  # type: ignore[union-attr]
            return guard.call("search_contacts", {"phone": PHONE})

    assert hook_context.run(hook)[0]["id"] == CONTACT_ID

    done = threading.Event()
    outcome: list[Any] = []

    def worker() -> None:
        with traj.activate():
            outcome.append(guard.call("remove_contact", {"contact_id": CONTACT_ID}))
        outcome.append(tg.current_trajectory())
        done.set()

    threading.Thread(target=worker).start()
    assert done.wait(30)
    assert outcome == [{"removed": CONTACT_ID}, None]
    traj.end()
    assert guard.find_trajectory("thread-42") is None  # ended: no longer findable
    summary = otel.summary("session-1").attributes
    assert summary["toolguard.trajectory.length"] == 2
    assert summary["toolguard.trajectory.first_error_depth"] == 3
    assert {s.parent.span_id for s in otel.call_spans("session-1")} == {
        otel.summary("session-1").context.span_id
    }


def test_live_trajectories_are_bounded_by_count_and_idle_time(otel, caplog) -> None:
    now = [0.0]
    guard = otel.guard(max_live_trajectories=2)
    guard.trajectories = tg.TrajectoryRegistry(2, idle_timeout=60.0, clock=lambda: now[0])
    a = guard.trajectory("a", key="ka").start()
    b = guard.trajectory("b", key="kb").start()
    guard.find_trajectory("ka")  # a is now the most recently used
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        c = guard.trajectory("c", key="kc").start()
    assert (a.ended, b.ended, c.ended) == (False, True, False)  # least recently used ended
    assert "evicted" in caplog.text
    now[0] = 59.0
    assert guard.find_trajectory("kc") is c  # a look-up counts as activity
    now[0] = 61.0
    assert guard.find_trajectory("ka") is None and a.ended  # idle 61 s > 60 s: expired
    assert guard.find_trajectory("kc") is c
    assert {s.attributes["toolguard.trajectory.id"] for s in otel.summary_spans()} == {"a", "b"}


def test_guard_trajectory_sends_its_summary_to_the_guards_provider(otel) -> None:
    guard, _ = contacts_guard(otel)
    with guard.trajectory("own-provider"):
        guard.call("search_contacts", {"phone": PHONE})
    # With the global provider unset, only the guard's provider could have received it.
    summary = otel.summary("own-provider")
    assert summary.attributes["toolguard.trajectory.length"] == 1


def test_a_framework_side_rejection_counts_in_t(otel) -> None:
    guard, _ = contacts_guard(otel)
    with guard.trajectory("framework-rejected") as traj:
        unknown = guard.record_rejection(
            "delete_all", "the framework has no tool delete_all", call_id="c1"
        )
        invalid = guard.record_rejection("search_contacts", "phone: field required", call_id="c2")
        guard.call("search_contacts", {"phone": PHONE}, call_id="c3")
    assert (unknown.check, invalid.check) == ("schema.tool", "schema.args")
    assert (unknown.step, invalid.step) == (1, 2)
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (3, 1, "schema")
    first = otel.call_spans("framework-rejected")[0].attributes
    assert first["toolguard.decision"] == "blocked"
    assert first["gen_ai.tool.call.id"] == "c1"


def test_a_framework_span_is_enriched_instead_of_duplicated(otel) -> None:
    guard, _ = contacts_guard(otel)
    tracer = otel.provider.get_tracer("some.framework")
    with guard.trajectory("one-span"):
        # Pydantic AI / ADK / MCP middleware open the call's span themselves.
        with tracer.start_as_current_span("execute_tool search_contacts") as framework_span:
            framework_span.set_attribute("framework.own", True)
            guard.call("search_contacts", {"phone": PHONE})
        with tracer.start_as_current_span("execute_tool remove_contact"):
            pending = guard.check("remove_contact", {"contact_id": "nope"})
            assert pending.rejection is not None
        # An explicit span works also when it is not current.
        explicit = tracer.start_span("execute_tool search_contacts")
        guard.check("search_contacts", {"phone": PHONE}, span=explicit).finish([])
        explicit.end()
    spans = otel.call_spans("one-span")
    assert [s.name for s in spans] == [
        "execute_tool search_contacts",
        "execute_tool remove_contact",
        "execute_tool search_contacts",
    ]
    assert all(s.instrumentation_scope.name == "some.framework" for s in spans)
    assert spans[0].attributes["framework.own"] is True
    assert spans[0].attributes["toolguard.step"] == 1
    assert spans[1].attributes["toolguard.cause"] == "dependency"
    # A guard told not to reuse spans opens its own below the framework's.
    otel.clear()
    own = otel.guard(reuse_framework_spans=False)
    own.register(lambda: 1, name="f")
    with tracer.start_as_current_span("execute_tool f"):
        own.call("f")
    assert [s.name for s in otel.spans()] == ["execute_tool f", "execute_tool f"]


@pytest.mark.parametrize("close", ["cancel", "finish", "fail"])
def test_a_call_closed_after_the_frameworks_span_ended_gets_a_span_of_its_own(
    otel, close: str
) -> None:
    # ADK ends its span of a call cancelled outside the tool callbacks; the run's end
    # cancels the call later. Written there, the verdict would be dropped with the span.
    guard, _ = contacts_guard(otel, record_content=True)
    tracer = otel.provider.get_tracer("some.framework")
    with guard.trajectory("ended-first") as traj:
        with tracer.start_as_current_span("execute_tool search_contacts") as framework_span:
            pending = guard.check("search_contacts", {"phone": PHONE}, call_id="c1")
        assert not framework_span.is_recording()
        if close == "cancel":
            pending.cancel()
        elif close == "finish":
            pending.finish([])
        else:
            pending.fail(RuntimeError("down"))
    theirs, ours = otel.call_spans()
    # The framework's span carries nothing of the guard's: the report sees one call.
    assert theirs.instrumentation_scope.name == "some.framework"
    assert not any(key.startswith("toolguard.") for key in theirs.attributes)
    attributes = ours.attributes
    assert ours.instrumentation_scope.name == "toolguard"
    assert ours.parent is not None and ours.parent.span_id == theirs.context.span_id
    assert (attributes["toolguard.trajectory.id"], attributes["toolguard.step"]) == (
        "ended-first",
        1,
    )
    assert attributes["gen_ai.tool.call.id"] == "c1"
    assert attributes["toolguard.decision"] == {"cancel": "cancelled"}.get(close, "allowed")
    assert attributes["toolguard.valid"] is (close != "fail")
    assert PHONE in attributes["gen_ai.tool.call.arguments"]  # record_content: kept too
    assert ours.end_time is not None
    assert traj.length == 1 and len(traj.verdicts) == 1


def test_a_framework_span_gets_the_calls_attributes_when_the_call_closes(otel) -> None:
    # Not at the check: a span that ends before the call closes must carry none of them.
    guard, _ = contacts_guard(otel)
    tracer = otel.provider.get_tracer("some.framework")
    with (
        guard.trajectory("at-close"),
        tracer.start_as_current_span("execute_tool search_contacts") as framework_span,
    ):
        pending = guard.check("search_contacts", {"phone": PHONE})
        at_check = dict(framework_span.attributes)
        pending.finish([])
        assert framework_span.attributes["toolguard.step"] == 1
    assert not any(key.startswith("toolguard.") for key in at_check)
    (span,) = otel.call_spans()
    assert span.attributes["toolguard.decision"] == "allowed"
    assert span.attributes["gen_ai.tool.name"] == "search_contacts"


def test_finish_reads_the_frameworks_error_flag(otel) -> None:
    guard = otel.guard()
    guard.declare("run", json_schema={"type": "object"}, produces={"$": "thing"})
    with guard.trajectory("flags") as traj:
        ok = guard.check("run", {})
        assert ok.finish("fine").valid
        failed = guard.check("run", {})
        verdict = failed.finish("command not found", error=True)
        forced_ok = guard.check("run", {})
        forced_ok.finish({"error": "this is data"}, error=False)
    assert (verdict.valid, verdict.check, verdict.decision) == (
        False,
        "state.error_result",
        "allowed",
    )
    assert traj.lookup("thing", "command not found") is None  # a failed call produces nothing
    assert [v.valid for v in traj.verdicts] == [True, False, True]


def test_fail_and_cancel(otel) -> None:
    guard = otel.guard()
    guard.declare("op", json_schema={"type": "object"})
    with guard.trajectory("ends") as traj:
        rejection = guard.check("op", {}, call_id="x").fail(TimeoutError("backend timed out"))
        cancelled = guard.check("op", {}).cancel()
        interrupted = guard.check("op", {})
        interrupted.fail(KeyboardInterrupt())
    assert (rejection.cause, rejection.decision, rejection.call_id) == (
        "state_consistency",
        "allowed",
        "x",
    )
    assert "backend timed out" in str(rejection)
    assert (cancelled.decision, cancelled.valid) == ("cancelled", True)
    assert interrupted.verdict is not None and interrupted.verdict.decision == "cancelled"
    assert (traj.length, traj.first_error_depth) == (3, 1)


def test_a_call_closes_exactly_once(otel) -> None:
    guard = otel.guard()
    guard.declare("op", json_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    with guard.trajectory("once") as traj:
        pending = guard.check("op", {"n": 1})
        pending.finish(1)
        for again in (lambda: pending.finish(1), lambda: pending.fail(ValueError()),
                      pending.cancel):  # fmt: skip
            with pytest.raises(tg.UsageError, match="already closed"):
                again()
        blocked = guard.check("op", {"n": "x"})
        with pytest.raises(tg.UsageError, match="must not run"):
            blocked.finish(1)
    assert traj.length == 2 and len(traj.verdicts) == 2
    assert len(otel.call_spans("once")) == 2


def test_a_call_finished_after_its_trajectory_ended_changes_nothing(otel, caplog) -> None:
    guard = otel.guard()
    guard.declare("op", json_schema={"type": "object"})
    with guard.trajectory("late") as traj:
        pending = guard.check("op", {})
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        pending.finish({"error": "failed late"})
    assert "after trajectory 'late' ended" in caplog.text
    assert (traj.length, traj.first_error_depth) == (1, 2)  # the summary's figures stand
    assert traj.verdicts == []
    span = otel.call_spans("late")[0]
    assert span.attributes["toolguard.valid"] is False  # the span still tells the truth
    assert otel.summary("late").attributes["toolguard.trajectory.first_error_depth"] == 2
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        guard.check("op", {}, trajectory=traj).finish(1)
    assert "checked outside it" in caplog.text and traj.length == 1


def test_a_dropped_or_abandoned_pending_call_is_cancelled_not_left_open(otel, caplog) -> None:
    guard = otel.guard()
    guard.declare("op", json_schema={"type": "object"})
    with caplog.at_level(logging.WARNING, logger="toolguard"), guard.trajectory("drop") as traj:
        guard.check("op", {})  # never finished, never referenced again
        gc.collect()
        with guard.check("op", {}):
            pass  # left the block without finish()
        with pytest.raises(RuntimeError), guard.check("op", {}):
            raise RuntimeError("tool blew up")
    assert [v.decision for v in traj.verdicts] == ["cancelled", "cancelled", "allowed"]
    assert traj.verdicts[2].check == "state.exception"
    assert len(otel.call_spans("drop")) == 3  # every span ended
    assert caplog.text.count("recorded as cancelled") == 2


def test_contract_mappings_read_place_to_kind_and_annotated_markers(otel) -> None:
    guard = otel.guard()

    @guard.tool(produces={"items[].id": "item_id", "owner.id": "user_id", "$.cursor": "cursor"})
    def list_items() -> dict[str, Any]:
        return {
            "items": [{"id": "i1"}, {"id": "i2"}],
            "owner": {"id": "u1"},
            "cursor": "c9",
            "other": {"id": "not-an-item"},
        }

    @guard.tool
    def buy(
        item_id: Annotated[str, tg.Ref("item_id")], note: Annotated[str, tg.Grounded] = "x"
    ) -> str:
        return item_id

    assert guard.get_tool("buy").refs == {"item_id": "item_id"}
    assert guard.get_tool("buy").grounded == ("note",)
    with guard.trajectory("paths", user_input="buy it, note: gift") as traj:
        list_items()
        assert guard.call("buy", {"item_id": "i2", "note": "gift"}) == "i2"
        assert guard.call("buy", {"item_id": "not-an-item", "note": "gift"}).cause == "dependency"
        assert guard.call("buy", {"item_id": "i1", "note": "invented"}).cause == "information"
    assert sorted(traj.live_values("item_id")) == ["i1", "i2"]
    assert traj.live_values("user_id") == ["u1"] and traj.live_values("cursor") == ["c9"]


@pytest.mark.parametrize(
    ("produces", "match"),
    [
        ({"contact_id": 3}, "must name a kind"),
        ({3: "contact_id"}, "result place"),
        (["id"], "mapping"),
    ],
)
def test_a_malformed_produces_is_a_definition_error(otel, produces, match) -> None:
    guard = otel.guard()
    with pytest.raises(tg.ToolDefinitionError, match=match):
        guard.register(lambda: [], name="f", produces=produces)


@pytest.mark.parametrize("name", ["state", "instance", "args", "result"])
def test_a_condition_asking_for_a_name_that_is_also_an_argument_is_a_definition_error(
    otel, name
) -> None:
    guard = otel.guard(state={"ok": True})
    namespace: dict[str, Any] = {}
    exec(f"def tool({name}: str) -> str:\n    return {name}\n", namespace)
    ambiguous = tg.Precondition("p", eval(f"lambda {name}: True"))  # a test-made lambda
    with pytest.raises(tg.ToolDefinitionError, match=f"'p' asks for '{name}'.*guard_state"):
        guard.register(namespace["tool"], preconditions=[ambiguous])
    # Unambiguous: the guard's state under a name of its own.
    seen = []
    clear = tg.Precondition("q", lambda guard_state: seen.append(guard_state) or True)
    guard.register(namespace["tool"], preconditions=[clear])
    assert guard.call("tool", {name: "x"}) == "x"
    assert seen == [{"ok": True}]


def test_direct_calls_raise_with_the_rejection_and_dispatch_returns_it(otel) -> None:
    guard = otel.guard()

    @guard.tool(refs={"contact_id": "contact_id"})
    def remove(contact_id: str) -> dict[str, str]:
        return {"removed": contact_id}

    with guard.trajectory("family"):
        with pytest.raises(tg.ToolCallRejected) as info:
            remove(contact_id=PHONE)  # a direct call: its declared return type, or this
        returned = guard.call("remove", {"contact_id": PHONE}, call_id="c9")
    exc = info.value
    assert isinstance(exc.rejection, tg.Rejection) and isinstance(exc.rejection, tg.Verdict)
    assert exc.cause == exc.rejection.cause == "dependency"
    assert (exc.step, exc.call_id) == (1, None)
    assert (returned.step, returned.call_id) == (2, "c9")
    assert isinstance(returned, tg.Verdict) and not returned.valid


def test_reprs_say_what_they_hold(otel) -> None:
    guard, _ = contacts_guard(otel)
    assert repr(guard) == (
        "Guard(mode='block', tools=[remove_contact, search_contacts], live_trajectories=0)"
    )
    tool_repr = repr(guard.get_tool("remove_contact"))
    assert tool_repr.startswith("Tool('remove_contact', refs={'contact_id': 'contact_id'}")
    assert "preconditions=['exists']" in tool_repr
    with guard.trajectory("r") as traj:
        pending = guard.check("search_contacts", {"phone": PHONE}, call_id="c1")
        assert repr(pending) == (
            "PendingCall('search_contacts', step=1, call_id='c1', admitted, running)"
        )
        pending.finish([])
        assert "closed, allowed" in repr(pending)
        assert repr(traj) == "Trajectory('r', T=1, FED=2, success=None, open)"
    assert repr(traj).endswith("ended)")


def test_bad_input_to_the_dispatch_entry_points_is_a_clear_error(otel) -> None:
    guard, _ = contacts_guard(otel)
    with pytest.raises(tg.UsageError, match="call_id must be a string"):
        guard.check("search_contacts", {}, call_id=7)  # type: ignore[arg-type]
    with pytest.raises(tg.UsageError, match="trajectory must be a Trajectory"):
        guard.call("search_contacts", {}, trajectory="t-1")  # type: ignore[arg-type]
    with pytest.raises(tg.UsageError, match="call ids"):
        guard.trajectory("x").reserve([1, 2])  # type: ignore[list-item]
    with pytest.raises(tg.UsageError, match="declared by contract alone"):
        guard.declare("external", json_schema={"type": "object"})
        guard.call("external", {})
    assert otel.call_spans()[-1].attributes["toolguard.decision"] == "cancelled"


def test_steps_assigned_by_another_process_are_kept(otel) -> None:
    guard = otel.guard()
    guard.declare("op", json_schema={"type": "object"})
    with guard.trajectory("remote") as traj:
        # The host ran steps 1-3 itself and sends step 4 and 6 with the calls it forwards.
        assert traj.reserve({"c4": 4, "c6": 6}) == [4, 6]
        guard.check("op", {}, call_id="c6").finish(1)
        guard.check("op", {}, call_id="c4").finish(1)
        assert guard.check("op", {}).step == 7  # the next free step follows the largest
        with pytest.raises(tg.UsageError, match="int >= 1"):
            traj.reserve({"c0": 0})
    assert traj.length == 7


def test_a_continued_trajectory_can_leave_its_summary_to_the_host(otel) -> None:
    guard = otel.guard()
    guard.declare("op", json_schema={"type": "object"})
    with guard.trajectory("shared", key="shared", summary=False) as traj:
        assert guard.find_trajectory("shared") is traj
        guard.check("op", {}).finish(1)
    assert otel.summary_spans() == []
    assert [s.attributes["toolguard.trajectory.id"] for s in otel.call_spans()] == ["shared"]


def test_a_framework_span_is_recognised_by_its_genai_attributes(otel) -> None:
    guard = otel.guard()
    guard.declare("op", json_schema={"type": "object"})
    tracer = otel.provider.get_tracer("mcp.server")
    with tracer.start_as_current_span("tools/call op") as span:
        span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "op"})
        guard.check("op", {}).finish(1)
    assert [s.name for s in otel.spans()] == ["tools/call op"]
    assert otel.spans()[0].attributes["toolguard.valid"] is True
    assert guard.has_tool("op") and not guard.has_tool("nope")


def test_declare_uses_its_name_and_leaves_the_callers_spec_alone(otel) -> None:
    guard = otel.guard()
    spec = tg.ToolSpec(name="other", json_schema={"type": "object"})
    tool = guard.declare("mine", spec)
    assert (tool.name, spec.name) == ("mine", "other") and guard.has_tool("mine")


def test_a_framework_refusing_an_admitted_call_rejects_it() -> None:
    """An adapter whose framework refuses the arguments after the guard admitted them (its
    own validation) closes the call as blocked: a step with that cause, nothing ran."""
    guard = tg.Guard()
    guard.declare("book", json_schema={"type": "object", "properties": {"nights": {}}})
    with guard.trajectory() as traj:
        pending = guard.check("book", {"nights": 0})
        assert pending.rejection is None
        why = "the framework's validator refused nights=0"
        rejection = pending.reject(tg.Failure("schema", "schema.args", why, why))
        assert pending.rejection is rejection and pending.done
        assert (rejection.decision, rejection.cause, rejection.check) == (
            "blocked",
            "schema",
            "schema.args",
        )
        with pytest.raises(tg.UsageError, match="blocked and must not run"):
            pending.reject(tg.Failure("schema", "schema.args", why, why))
    assert traj.length == 1 and traj.first_error_depth == 1


def test_a_check_log_mode_already_failed_is_listed_once_when_the_framework_refuses() -> None:
    """Log mode admitted the call with its schema failure; the framework's own validation
    then refuses it for the same check: failed_checks names each check once."""
    guard = tg.Guard(mode="log")
    schema = {"type": "object", "properties": {"count": {"type": "integer"}}}
    guard.declare("remove", json_schema={**schema, "required": ["count"]})
    with guard.trajectory() as traj:
        pending = guard.check("remove", {"count": "abc"})
        assert pending.rejection is None  # logged: it may run
        refused = "the framework refused count='abc'"
        pending.reject(tg.Failure("schema", "schema.args", refused, refused))
        other = guard.check("remove", {"count": "x"})
        other.reject(tg.Failure("state_consistency", "state.exception", refused, refused))
    first, second = traj.verdicts
    assert (first.decision, first.failed_checks) == ("blocked", ("schema.args",))
    assert second.failed_checks == ("schema.args", "state.exception")  # a new check is added


def test_a_reserved_call_the_run_gave_up_on_is_cancelled_or_blocked() -> None:
    """cancel_unstarted: the adapters' and the turn helpers' end of a call that never
    started: its reserved step gets a verdict, cancelled, or blocked where its checks fail."""
    guard = tg.Guard()
    guard.declare(
        "remove", json_schema={"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    with guard.trajectory() as traj:
        traj.reserve(["c1", "c2"])
        legal = guard.cancel_unstarted("remove", {"n": 1}, call_id="c1")
        refused = guard.cancel_unstarted("remove", {"n": "x"}, call_id="c2")
    assert (legal.step, legal.decision, legal.valid) == (1, "cancelled", True)
    assert (refused.step, refused.decision, refused.cause) == (2, "blocked", "schema")
    assert traj.length == 2 and [v.decision for v in traj.verdicts] == ["cancelled", "blocked"]
