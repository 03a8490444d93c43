"""Fork dry runs (issue 15, part 1): a call tried on a fork of the state before it runs.

Deep copies of a dict state (through a ``tg.State`` parameter) and of an object whose methods
are tools, a user-supplied fork/discard pair, async tools, log mode, external effects, and
what a failing fork does. SQLite savepoints are in test_fork_sqlite.py.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import pytest

import toolguard as tg

if TYPE_CHECKING:  # the root conftest's type; importing it at run time could find another conftest
    from conftest import Telemetry

DictState = Annotated[dict[str, Any], tg.State]


def contacts() -> dict[str, Any]:
    return {"id_1": {"name": "Alice"}, "id_2": {"name": "Bob"}}


class Files:
    """A small environment whose public methods are the tools; it raises on a bad call."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {"notes.txt": "hello"}
        self.runs = 0  # executions on this object (a fork counts on its copy, not here)

    def rm(self, name: str) -> dict[str, str]:
        self.runs += 1
        if name not in self.files:
            raise FileNotFoundError(f"rm: {name}: no such file")
        del self.files[name]
        return {"removed": name}

    def touch(self, name: str) -> dict[str, str]:
        self.runs += 1
        self.files.setdefault(name, "")
        return {"created": name}


# -- deep copy of a dict state, through a tg.State parameter ---------------------------------


def test_dict_state_rejected_call_is_blocked_and_state_untouched(otel: Telemetry) -> None:
    state = contacts()
    guard = otel.guard(state=state, dry_run=tg.DeepCopyFork())
    executed: list[str] = []

    @guard.tool
    def remove_contact(contact_id: str, db: DictState) -> dict[str, str]:
        executed.append(contact_id)
        if contact_id not in db:
            return {"error": f"contact {contact_id} does not exist"}
        del db[contact_id]
        return {"removed": contact_id}

    with otel.trajectory("t1") as traj:
        out = guard.call("remove_contact", {"contact_id": "id_9"})
        ok = guard.call("remove_contact", {"contact_id": "id_1"})

    assert isinstance(out, tg.Rejection)
    assert (out.cause, out.check, out.decision) == ("state_consistency", "state.dry_run", "blocked")
    assert "contact id_9 does not exist" in str(out)  # the environment's own message
    assert ok == {"removed": "id_1"}
    assert state == {"id_2": {"name": "Bob"}}  # only the real run of the second call
    # Each call ran once on its fork; only the accepted one ran again for real.
    assert executed == ["id_9", "id_1", "id_1"]
    assert (traj.length, traj.first_error_depth) == (2, 1)
    spans = otel.call_spans("t1")
    assert len(spans) == 2  # the dry runs open no span of their own
    blocked, allowed = sorted(spans, key=lambda s: s.attributes["toolguard.step"])
    assert blocked.attributes["toolguard.decision"] == "blocked"
    assert blocked.attributes["toolguard.cause"] == "state_consistency"
    assert blocked.attributes["toolguard.check"] == "state.dry_run"
    assert blocked.attributes["toolguard.dry_run"] == "rejected"
    assert "id_9" not in blocked.attributes["toolguard.message"]  # no value without opt-in
    assert allowed.attributes["toolguard.dry_run"] == "passed"
    assert allowed.attributes["toolguard.valid"] is True


def test_state_parameter_is_hidden_from_the_schema_and_refused_from_the_model(
    otel: Telemetry,
) -> None:
    state = contacts()
    guard = otel.guard(state=state, dry_run=True)

    @guard.tool
    def count(db: DictState, prefix: str = "id_") -> int:
        return sum(1 for k in db if k.startswith(prefix))

    assert guard.get_tool("count").schema.names == ("prefix",)
    assert guard.call("count", {}) == 2
    sent = guard.call("count", {"db": {"fake": 1}})  # the model cannot hand in a state
    assert isinstance(sent, tg.Rejection) and sent.cause == "schema"
    assert count(db={"id_x": 1}) == 1  # a direct call may pass its own, by keyword
    assert count() == 2


def test_dry_run_binds_nothing_and_takes_no_step(otel: Telemetry) -> None:
    """The fork's result is never bound: only the real run's id is (ids here are random)."""
    state: dict[str, Any] = {}
    guard = otel.guard(state=state, dry_run=True)

    @guard.tool(produces={"id": "order_id"})
    def create_order(item: str, db: DictState) -> dict[str, str]:
        order = uuid.uuid4().hex
        db[order] = item
        return {"id": order}

    with otel.trajectory("t2") as traj:
        out = guard.call("create_order", {"item": "book"})
    assert list(state) == [out["id"]]
    assert traj.live_values("order_id") == [out["id"]]
    assert traj.length == 1


# -- deep copy of an object whose methods are tools ------------------------------------------


def test_object_methods_run_on_a_forked_instance(otel: Telemetry) -> None:
    env = Files()
    guard = otel.guard(state=env, dry_run=tg.DeepCopyFork())
    proxy = guard.proxy(env, ["rm", "touch"])
    with otel.trajectory("t3") as traj:
        bad = guard.call("rm", {"name": "missing.txt"})
        with pytest.raises(tg.ToolCallRejected) as raised:
            proxy.rm(name="missing.txt")  # a direct call raises the rejection
        good = guard.call("rm", {"name": "notes.txt"})
    assert isinstance(bad, tg.Rejection) and bad.decision == "blocked"
    assert "FileNotFoundError: rm: missing.txt: no such file" in str(bad)
    assert raised.value.check == "state.dry_run"
    assert good == {"removed": "notes.txt"}
    assert env.files == {}
    assert env.runs == 1  # the real object ran only the accepted call; the forks ran the rest
    assert traj.length == 3 and traj.first_error_depth == 1


def test_method_decorated_in_the_class_body_runs_on_a_forked_instance(otel: Telemetry) -> None:
    guard = otel.guard(dry_run=True)

    class Account:
        def __init__(self) -> None:
            self.balance = 10

        @guard.tool
        def withdraw(self, amount: int) -> int:
            if amount > self.balance:
                raise ValueError("insufficient funds")
            self.balance -= amount
            return self.balance

    account = Account()
    with pytest.raises(tg.ToolCallRejected, match="dry run"):
        account.withdraw(50)
    assert account.withdraw(4) == 6
    assert account.balance == 6


# -- a user-supplied fork / discard pair ------------------------------------------------------


class Journal:
    """A state whose fork is a snapshot it can restore: the user's own fork and discard."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.forks = 0
        self.discards = 0

    def snapshot(self, state: Any) -> Journal:
        self.forks += 1
        copy = Journal()
        copy.entries = list(self.entries)
        return copy

    def drop(self, forked: Journal) -> None:
        self.discards += 1


def test_user_fork_and_discard_pair_is_used_and_always_discarded(otel: Telemetry) -> None:
    journal = Journal()
    guard = otel.guard(state=journal, dry_run=tg.CallbackFork(journal.snapshot, journal.drop))

    @guard.tool
    def append(text: str, state: Annotated[Journal, tg.State]) -> int:
        if not text.strip():
            raise ValueError("empty entry")
        state.entries.append(text)
        return len(state.entries)

    assert guard.call("append", {"text": "first"}) == 1
    rejected = guard.call("append", {"text": "  "})
    assert isinstance(rejected, tg.Rejection) and "ValueError: empty entry" in str(rejected)
    assert journal.entries == ["first"]
    assert (journal.forks, journal.discards) == (2, 2)  # discarded also when the tool raised


def test_a_fork_that_returns_the_state_itself_never_runs_the_tool_on_it(otel: Telemetry) -> None:
    state = {"n": 0}
    runs: list[int] = []
    guard = otel.guard(state=state, dry_run=tg.CallbackFork(lambda s: s))

    @guard.tool
    def bump(db: DictState) -> int:
        runs.append(1)
        db["n"] += 1
        return int(db["n"])

    out = guard.call("bump", {})
    assert isinstance(out, tg.Rejection) and out.check == "state.dry_run"
    assert "could not be verified" in str(out)
    assert state == {"n": 0} and runs == []


@pytest.mark.parametrize("where", ["fork", "discard"])
def test_a_failing_fork_or_discard_fails_closed_by_default(otel: Telemetry, where: str) -> None:
    def boom(_: Any) -> Any:
        raise RuntimeError(f"{where} broke")

    strategy = (
        tg.CallbackFork(boom) if where == "fork" else tg.CallbackFork(lambda s: dict(s), boom)
    )
    state = {"n": 0}
    guard = otel.guard(state=state, dry_run=strategy)

    @guard.tool
    def bump(db: DictState) -> int:
        db["n"] += 1
        return int(db["n"])

    out = guard.call("bump", {})  # no exception reaches the agent
    assert isinstance(out, tg.Rejection)
    assert (out.cause, out.check, out.decision) == ("state_consistency", "state.dry_run", "blocked")
    assert f"the dry run's {where} raised RuntimeError" in out.message
    assert state == {"n": 0}
    span = otel.only_call()
    assert span.attributes["toolguard.dry_run"] == "guard_error"


def test_a_failing_fork_fails_open_when_asked(otel: Telemetry) -> None:
    def boom(_: Any) -> Any:
        raise RuntimeError("no copy today")

    state = {"n": 0}
    guard = otel.guard(state=state, dry_run=tg.CallbackFork(boom), on_guard_error="fail_open")

    @guard.tool
    def bump(db: DictState) -> int:
        db["n"] += 1
        return int(db["n"])

    assert guard.call("bump", {}) == 1  # unverified, but run: the guard's policy
    assert otel.only_call().attributes["toolguard.dry_run"] == "guard_error"


# -- modes, precedence, declarations -----------------------------------------------------------


def test_log_mode_records_the_dry_run_failure_and_runs_the_call(otel: Telemetry) -> None:
    env = Files()
    guard = otel.guard(state=env, mode="log", dry_run=True)
    guard.proxy(env, ["rm"])
    with otel.trajectory("t4") as traj:
        out = guard.call("rm", {"name": "missing.txt"})
    assert isinstance(out, tg.Rejection)  # the real call ran and raised too
    assert env.runs == 1
    verdict = traj.verdicts[0]
    assert verdict.decision == "logged"
    assert verdict.cause == "state_consistency"
    assert verdict.failed_checks == ("state.dry_run", "state.exception")
    assert otel.only_call().attributes["toolguard.decision"] == "logged"


def test_cheap_checks_come_first_and_a_blocked_call_is_never_forked(otel: Telemetry) -> None:
    journal = Journal()
    guard = otel.guard(state=journal, dry_run=tg.CallbackFork(journal.snapshot, journal.drop))

    @guard.tool(
        preconditions=[tg.Precondition("short", lambda text: len(text) < 10, "at most 9 chars")]
    )
    def append(text: str, state: Annotated[Journal, tg.State]) -> int:
        state.entries.append(text)
        return len(state.entries)

    schema = guard.call("append", {"text": 3})
    pre = guard.call("append", {"text": "far too long"})
    assert isinstance(schema, tg.Rejection) and schema.cause == "schema"
    assert isinstance(pre, tg.Rejection) and pre.cause == "precondition"
    assert journal.forks == 0


def test_external_effects_are_never_forked(otel: Telemetry) -> None:
    sent: list[str] = []
    journal = Journal()
    guard = otel.guard(state=journal, dry_run=tg.CallbackFork(journal.snapshot, journal.drop))

    @guard.tool(external_effects=True)
    def send_email(to: str) -> str:
        sent.append(to)
        return "sent"

    assert guard.call("send_email", {"to": "a@example.com"}) == "sent"
    assert sent == ["a@example.com"] and journal.forks == 0
    assert "toolguard.dry_run" not in otel.only_call().attributes
    with pytest.raises(tg.ToolDefinitionError, match="external_effects"):

        @guard.tool(dry_run=True, external_effects=True)
        def pay(amount: int) -> str:
            return "paid"


def test_a_function_that_a_copy_cannot_reach_is_a_definition_error(otel: Telemetry) -> None:
    store: dict[str, int] = {}
    guard = otel.guard(state=store, dry_run=True)
    with pytest.raises(tg.ToolDefinitionError, match=r"tg\.State"):

        @guard.tool
        def put(key: str) -> None:
            store[key] = 1

    @guard.tool(dry_run=False)  # said out loud: this one is not tried first
    def put_unchecked(key: str) -> None:
        store[key] = 1

    put_unchecked("a")
    assert store == {"a": 1}
    with pytest.raises(tg.ToolDefinitionError, match="declared by contract alone"):
        guard.declare("remote", json_schema={"type": "object"}, dry_run=True)
    with pytest.raises(tg.ToolDefinitionError, match="dry_run must be"):
        otel.guard(dry_run="yes")


def test_a_state_parameter_needs_a_guard_state(otel: Telemetry) -> None:
    guard = otel.guard()
    with pytest.raises(tg.ToolDefinitionError, match=re.escape("Guard(state=...)")):

        @guard.tool
        def read(db: DictState) -> int:
            return len(db)


def test_a_cancellation_inside_the_dry_run_cancels_the_call_and_discards_the_fork(
    otel: Telemetry,
) -> None:
    journal = Journal()
    guard = otel.guard(state=journal, dry_run=tg.CallbackFork(journal.snapshot, journal.drop))

    @guard.tool
    def wait(state: Annotated[Journal, tg.State]) -> None:
        raise KeyboardInterrupt

    with otel.trajectory("t5") as traj, pytest.raises(KeyboardInterrupt):
        guard.call("wait", {})
    assert journal.discards == 1
    assert traj.verdicts[0].decision == "cancelled"


# -- async tools -------------------------------------------------------------------------------


class AsyncFiles(Files):
    async def arm(self, name: str) -> dict[str, str]:
        await asyncio.sleep(0)
        return self.rm(name)


def test_async_tools_are_tried_on_a_fork(otel: Telemetry) -> None:
    env = AsyncFiles()
    state = contacts()
    guard = otel.guard(state=state, dry_run=True)
    proxy = guard.proxy(env, ["arm"])

    @guard.tool
    async def aremove(contact_id: str, db: DictState) -> str:
        await asyncio.sleep(0)
        del db[contact_id]
        return contact_id

    async def main() -> list[Any]:
        with otel.trajectory("t6"):
            first = await guard.acall("arm", {"name": "missing.txt"})
            batch = await guard.acall_batch(
                [("aremove", {"contact_id": "id_7"}), ("aremove", {"contact_id": "id_1"})]
            )
            with pytest.raises(tg.ToolCallRejected):
                await proxy.arm(name="missing.txt")
            return [first, *batch]

    first, missing, removed = asyncio.run(main())
    assert isinstance(first, tg.Rejection) and first.check == "state.dry_run"
    assert isinstance(missing, tg.Rejection) and "KeyError" in str(missing)
    assert removed == "id_1"
    assert env.runs == 0 and env.files == {"notes.txt": "hello"}
    assert state == {"id_2": {"name": "Bob"}}


def test_a_guarded_tool_called_during_a_dry_run_is_no_step_and_no_second_fork(
    otel: Telemetry,
) -> None:
    journal = Journal()
    guard = otel.guard(state=journal, dry_run=tg.CallbackFork(journal.snapshot, journal.drop))

    @guard.tool(produces={"$": "entry"})
    def note(text: str, state: Annotated[Journal, tg.State]) -> str:
        state.entries.append(text)
        return text

    @guard.tool
    def note_twice(text: str, state: Annotated[Journal, tg.State]) -> int:
        note(text, state=state)
        note(text + "!", state=state)
        return len(state.entries)

    with otel.trajectory("nested") as traj:
        assert guard.call("note_twice", {"text": "a"}) == 2
    # One fork for the outer call's dry run (its inner calls run on that fork, unforked),
    # then one each for the inner calls of the real run.
    assert journal.forks == journal.discards == 3
    assert journal.entries == ["a", "a!"]
    assert traj.length == 1 and traj.live_values("entry") == []  # nested: no step, no binding
    assert len(otel.call_spans("nested")) == 1


def test_a_guarded_tool_using_the_guards_state_during_a_dry_run_gets_the_fork(
    otel: Telemetry,
) -> None:
    # The inner tool is called without a state of its own, so it takes the guard's: during
    # the outer call's dry run that must be the fork, or the dry run changes the real state.
    state = contacts()
    guard = otel.guard(state=state, dry_run=tg.DeepCopyFork())

    @guard.tool
    def forget(contact_id: str, db: DictState) -> str:
        del db[contact_id]
        return contact_id

    @guard.tool
    def forget_then_fail(contact_id: str, db: DictState) -> dict[str, str]:
        forget(contact_id)  # the guard's state, not ``db``
        return {"error": "refused after the first change"}

    with otel.trajectory("inner-state") as traj:
        out = guard.call("forget_then_fail", {"contact_id": "id_1"})
    assert isinstance(out, tg.Rejection) and out.check == "state.dry_run"
    assert state == contacts()  # the real state as it was
    assert traj.length == 1
    # Outside a dry run the inner call changes the real state, as it would unguarded.
    with otel.trajectory("inner-state-real"):
        assert forget("id_2") == "id_2"
    assert state == {"id_1": {"name": "Alice"}}


def test_an_async_guarded_tool_using_the_guards_state_during_a_dry_run_gets_the_fork(
    otel: Telemetry,
) -> None:
    state = contacts()
    guard = otel.guard(state=state, dry_run=tg.DeepCopyFork())

    @guard.tool
    async def forget(contact_id: str, db: DictState) -> str:
        del db[contact_id]
        return contact_id

    @guard.tool
    async def forget_then_fail(contact_id: str, db: DictState) -> dict[str, str]:
        await forget(contact_id)
        return {"error": "refused after the first change"}

    async def main() -> Any:
        with otel.trajectory("inner-state-async"):
            return await guard.acall("forget_then_fail", {"contact_id": "id_1"})

    out = asyncio.run(main())
    assert isinstance(out, tg.Rejection) and out.check == "state.dry_run"
    assert state == contacts()


def test_a_plan_step_using_the_guards_state_through_a_nested_call_changes_only_the_fork(
    otel: Telemetry,
) -> None:
    state = contacts()
    guard = otel.guard(state=state, dry_run=tg.DeepCopyFork())

    @guard.tool
    def forget(contact_id: str, db: DictState) -> str:
        del db[contact_id]
        return contact_id

    @guard.tool
    def forget_via(contact_id: str, db: DictState) -> str:
        return forget(contact_id)

    report = guard.verify_plan(
        [
            {"tool": "forget_via", "arguments": {"contact_id": "id_1"}},
            {"tool": "forget_via", "arguments": {"contact_id": "id_1"}},
        ]
    )
    assert state == contacts()  # the plan ran on a fork
    assert not report.ok  # the second step finds id_1 already gone on the fork
