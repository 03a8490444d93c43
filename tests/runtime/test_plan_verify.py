"""guard.verify_plan (issue 15, part 2): the first step of a plan that would fail, and why.

A small file system whose methods are the tools: ``mkdir``, ``cd`` (precondition: the
directory exists), ``ls`` (produces the ``path`` kind), ``rm`` (refers to a ``path``,
invalidates it) and ``mail`` (external effects). Nothing a verification does may reach the
real object, the trajectory's T or its FED.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

import toolguard as tg

if TYPE_CHECKING:  # the root conftest's type; importing it at run time could find another conftest
    from conftest import Telemetry


class Disk:
    def __init__(self) -> None:
        self.dirs = {"/", "/home"}
        self.files = {"/home/a.txt": "x", "/home/b.txt": "y"}
        self.cwd = "/"
        self.runs = 0

    def mkdir(self, name: str) -> dict[str, str]:
        self.runs += 1
        path = self._abs(name)
        if path in self.dirs:
            raise FileExistsError(f"mkdir: {path}: exists")
        self.dirs.add(path)
        return {"created": path}

    def cd(self, name: str) -> dict[str, str]:
        self.runs += 1
        path = self._abs(name)
        if path not in self.dirs:
            raise NotADirectoryError(f"cd: {path}: no such directory")
        self.cwd = path
        return {"cwd": path}

    def ls(self) -> dict[str, Any]:
        self.runs += 1
        prefix = self.cwd.rstrip("/") + "/"
        return {"entries": [{"path": p, "size": len(c)} for p, c in sorted(self.files.items())
                            if p.startswith(prefix)]}  # fmt: skip

    def rm(self, path: str) -> dict[str, str]:
        self.runs += 1
        if path not in self.files:
            raise FileNotFoundError(f"rm: {path}: no such file")
        del self.files[path]
        return {"removed": path}

    def mail(self, to: str, body: str) -> str:
        self.runs += 1
        return "sent"

    async def als(self) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self.ls()

    def _abs(self, name: str) -> str:
        return name if name.startswith("/") else self.cwd.rstrip("/") + "/" + name


def dir_exists(instance: Disk, name: str) -> bool:
    return instance._abs(name) in instance.dirs


SPECS = {
    "mkdir": tg.ToolSpec(),
    "cd": tg.ToolSpec(preconditions=[tg.Precondition("dir_exists", dir_exists, "no such dir")]),
    "ls": tg.ToolSpec(produces={"entries[].path": "path"}),
    "als": tg.ToolSpec(produces={"entries[].path": "path"}),
    "rm": tg.ToolSpec(refs={"path": "path"}, invalidates={"path": "path"}),
    "mail": tg.ToolSpec(external_effects=True, grounded=["to"]),
}


def disk_guard(otel: Telemetry, **options: Any) -> tuple[tg.Guard, Disk]:
    disk = Disk()
    guard = otel.guard(state=disk, **options)
    guard.proxy(disk, SPECS)
    return guard, disk


def test_a_plan_whose_third_step_fails_on_the_fork(otel: Telemetry) -> None:
    guard, disk = disk_guard(otel, dry_run=tg.DeepCopyFork())
    plan = [
        tg.PlanStep("mkdir", {"name": "/tmp"}),
        tg.PlanStep("cd", {"name": "/tmp"}),  # its precondition holds only after step 0
        tg.PlanStep("mkdir", {"name": "/tmp"}, id="again"),  # exists by then
        tg.PlanStep("ls"),
    ]
    verdict = guard.verify_plan(plan)
    assert not verdict.ok
    assert (verdict.failed, verdict.cause, verdict.check) == (
        2,
        "state_consistency",
        "state.dry_run",
    )
    assert verdict.message is not None
    assert verdict.message.startswith("steps[2] (`mkdir`, id 'again') would fail")
    assert "FileExistsError: mkdir: /tmp: exists" in verdict.message  # the environment's words
    assert "after steps[0] to steps[1]" in verdict.message
    assert [s.valid for s in verdict.steps] == [True, True, False]  # step 3 is not checked
    assert all(s.ran_on_fork for s in verdict.steps)
    assert verdict.dry_run
    # Nothing ran on the real disk.
    assert disk.runs == 0 and "/tmp" not in disk.dirs and disk.cwd == "/"


def test_a_valid_plan_with_references_resolved_from_the_fork(otel: Telemetry) -> None:
    guard, disk = disk_guard(otel, dry_run=True)
    plan = [
        tg.PlanStep("cd", {"name": "/home"}),
        tg.PlanStep("ls", id="listing"),
        tg.PlanStep("rm", {"path": tg.StepRef("listing", "entries.0.path")}),
        tg.PlanStep("rm", {"path": tg.StepRef(1, "entries.-1.path")}),
    ]
    verdict = guard.verify_plan(plan)
    assert verdict.ok and verdict.failed is None
    assert str(verdict) == "The plan passed verification (4 steps)."
    assert [s.ran_on_fork for s in verdict.steps] == [True] * 4
    assert disk.files == {"/home/a.txt": "x", "/home/b.txt": "y"} and disk.runs == 0
    # Removing the same file twice: the second reference is stale.
    twice = [*plan[:3], tg.PlanStep("rm", {"path": tg.StepRef(1, "entries.0.path")})]
    verdict = guard.verify_plan(twice)
    assert (verdict.failed, verdict.cause, verdict.check) == (3, "dependency", "dependency.path")
    assert "stale path" in str(verdict) and "steps[2] (`rm`)" in str(verdict)


def test_without_a_fork_references_are_checked_by_kind(otel: Telemetry) -> None:
    guard, disk = disk_guard(otel)  # no dry run anywhere: symbolic only
    plan = [
        tg.PlanStep("mkdir", {"name": "/tmp"}),
        tg.PlanStep("cd", {"name": "/tmp"}),
        tg.PlanStep("ls"),
        tg.PlanStep("rm", {"path": tg.StepRef(2, "entries.0.path")}),
    ]
    verdict = guard.verify_plan(plan)
    assert verdict.ok and not verdict.dry_run
    # cd's precondition reads the state, which step 0 changes: said, not guessed.
    assert any("dir_exists" in note for note in verdict.steps[1].unchecked)
    assert not any(s.ran_on_fork for s in verdict.steps)
    # A reference to a step whose tool produces no `path`, and a path that misses it.
    wrong_step = [*plan[:3], tg.PlanStep("rm", {"path": tg.StepRef(0, "created")})]
    verdict = guard.verify_plan(wrong_step)
    assert (verdict.failed, verdict.cause) == (3, "dependency")
    assert "returns no path" in str(verdict) and "`ls`" in str(verdict)
    wrong_path = [*plan[:3], tg.PlanStep("rm", {"path": tg.StepRef(2, "entries.0.size")})]
    verdict = guard.verify_plan(wrong_path)
    assert verdict.failed == 3
    assert '{"$step": 2, "path": "entries.0.path"}' in str(verdict)  # the fix, spelt out
    # A precondition on the current state still holds for the first step.
    verdict = guard.verify_plan([tg.PlanStep("cd", {"name": "/nowhere"})])
    assert (verdict.failed, verdict.cause, verdict.check) == (
        0, "precondition", "precondition.dir_exists")  # fmt: skip
    assert disk.runs == 0


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ({"$step": 5}, "no step of the plan"),
        ({"$step": 2}, "this step itself"),
        ({"$step": 3}, "a later step"),
        ({"$step": "later"}, "a later step"),
        ({"$step": "nope"}, "the id of no step"),
    ],
)
def test_a_reference_to_no_earlier_step_names_the_step_and_the_reference(
    otel: Telemetry, ref: dict[str, Any], why: str
) -> None:
    guard, _ = disk_guard(otel, dry_run=True)
    plan = [
        {"tool": "cd", "arguments": {"name": "/home"}},
        {"tool": "ls"},
        {"tool": "rm", "arguments": {"path": ref}},
        {"tool": "ls", "id": "later"},
    ]
    verdict = guard.verify_plan(plan)
    assert (verdict.failed, verdict.cause, verdict.check) == (2, "dependency", "dependency.path")
    assert str(verdict).startswith("steps[2] (`rm`) would fail (dependency): `path` refers to")
    assert json.dumps(ref) in str(verdict) and why in str(verdict)


def test_an_unresolvable_path_on_the_fork_says_what_the_result_has(otel: Telemetry) -> None:
    guard, _ = disk_guard(otel, dry_run=True)
    plan = [
        {"tool": "cd", "arguments": {"name": "/home"}},
        {"tool": "ls", "id": "l"},
        {"tool": "rm", "arguments": {"path": {"$step": "l", "path": "entries.7.path"}}},
    ]
    verdict = guard.verify_plan(plan)
    assert (verdict.failed, verdict.cause) == (2, "dependency")
    assert "entries is a list of 2 items: no item 7" in str(verdict)
    plan[2] = {"tool": "rm", "arguments": {"path": {"$step": "l", "path": "files.0"}}}
    assert "has no key 'files' (its keys: 'entries')" in str(guard.verify_plan(plan))


def test_schema_checks_literal_arguments_and_leaves_references_alone(otel: Telemetry) -> None:
    guard, _ = disk_guard(otel)
    plan = [tg.PlanStep("ls"), tg.PlanStep("rm", {"path": tg.StepRef(0, "entries.0.path")})]
    assert guard.verify_plan(plan).ok  # the reference's value (unknown) is not judged
    bad = [tg.PlanStep("ls"), tg.PlanStep("rm", {"path": tg.StepRef(0, "entries.0.path"), "x": 1})]
    verdict = guard.verify_plan(bad)
    assert (verdict.failed, verdict.cause, verdict.check) == (1, "schema", "schema.args")
    assert "x: unknown argument" in str(verdict)
    verdict = guard.verify_plan([tg.PlanStep("mkdir", {"name": 3})])
    assert (verdict.failed, verdict.cause) == (0, "schema")
    verdict = guard.verify_plan([tg.PlanStep("rmdir", {"name": "/tmp"})])
    assert (verdict.cause, verdict.check) == ("schema", "schema.tool")


def test_literal_ids_are_checked_against_the_trajectory(otel: Telemetry) -> None:
    guard, disk = disk_guard(otel)
    with otel.trajectory("plans") as traj:
        traj.bind("path", "/home/a.txt")
        assert guard.verify_plan([tg.PlanStep("rm", {"path": "/home/a.txt"})]).ok
        verdict = guard.verify_plan([tg.PlanStep("rm", {"path": "/home/z.txt"})])
        assert (verdict.failed, verdict.cause) == (0, "dependency")
        assert "'/home/a.txt'" in str(verdict)  # the values the agent has, offered
        assert "`ls`" in str(verdict)  # and where to get one
        # A placeholder where a grounded value belongs (mail is never forked).
        verdict = guard.verify_plan([tg.PlanStep("mail", {"to": "<unknown>", "body": "hi"})])
        assert (verdict.cause, verdict.check) == ("information", "information.to")
        assert traj.length == 0  # verification takes no step
    assert traj.first_error_depth == 1  # T + 1: no call, no error
    assert disk.runs == 0


def test_a_step_that_cannot_run_on_the_fork_stops_the_fork_there(otel: Telemetry) -> None:
    guard, disk = disk_guard(otel, dry_run=True)
    plan = [
        tg.PlanStep("mkdir", {"name": "/tmp"}),
        tg.PlanStep("mail", {"to": "ops@example.com", "body": "made /tmp"}),
        tg.PlanStep("cd", {"name": "/tmp"}),
    ]
    verdict = guard.verify_plan(plan)
    assert verdict.ok
    assert [s.ran_on_fork for s in verdict.steps] == [True, False, False]
    assert "external_effects" in verdict.steps[1].unchecked[0]
    assert any("dir_exists" in note for note in verdict.steps[2].unchecked)
    assert disk.runs == 0


def test_planner_json_form(otel: Telemetry) -> None:
    guard, _ = disk_guard(otel, dry_run=True)
    text = json.dumps(
        {
            "steps": [
                {"name": "cd", "args": '{"name": "/home"}'},
                {"tool": "ls", "id": "l"},
                {"tool": "rm", "arguments": {"path": {"$step": "l", "path": "entries.0.path"}}},
            ]
        }
    )
    assert guard.verify_plan(text).ok
    assert guard.verify_plan(text.encode()).ok
    plan = tg.PlanStep("rm", {"path": tg.StepRef("l", "entries.0.path")}, id="x")
    assert plan.to_json() == {
        "tool": "rm", "arguments": {"path": {"$step": "l", "path": "entries.0.path"}}, "id": "x"
    }  # fmt: skip
    malformed = {
        "[{": (None, "not valid JSON"),
        '{"tool": "ls"}': (None, "must be a JSON list"),
        '[{"tool": "ls", "argument": {}}]': (0, "unknown key 'argument'"),
        '[{"arguments": {}}]': (0, "has no `tool`"),
        '[{"tool": "ls", "id": "a"}, {"tool": "ls", "id": "a"}]': (1, "reuses the id 'a'"),
        '[{"tool": "rm", "arguments": {"path": {"$step": 0, "pth": "x"}}}]': (0, "unknown keys"),
        '[{"tool": "rm", "arguments": {"path": {"$step": true}}}]': (0, "malformed reference"),
        # a path of 0 or false was read as "the whole result"
        '[{"tool": "rm", "arguments": {"path": {"$step": 0, "path": 0}}}]': (0, "not 0"),
        '[{"tool": "rm", "arguments": {"path": {"$step": 0, "path": false}}}]': (0, "not False"),
        "[3]": (0, "not a step object"),
    }
    for text, (failed, words) in malformed.items():
        verdict = guard.verify_plan(text)
        assert (verdict.failed, verdict.cause, verdict.check) == (failed, "schema", "schema.plan")
        assert words in str(verdict), (text, str(verdict))
    with pytest.raises(tg.UsageError):
        guard.verify_plan(42)  # type: ignore[arg-type]


def test_verification_spans_are_not_call_spans(otel: Telemetry) -> None:
    guard, _ = disk_guard(otel, dry_run=True)
    with otel.trajectory("spans"):
        guard.verify_plan([tg.PlanStep("cd", {"name": "/home"}), tg.PlanStep("cd", {"name": "/x"})])
    assert otel.call_spans() == []
    plans = [s for s in otel.spans() if s.name == "verify_plan"]
    steps = [s for s in otel.spans() if s.name.startswith("verify_plan ")]
    assert len(plans) == 1 and len(steps) == 2
    plan = plans[0].attributes
    assert plan["gen_ai.operation.name"] == "verify_plan"
    assert plan["toolguard.trajectory.id"] == "spans"
    assert (plan["toolguard.plan.valid"], plan["toolguard.plan.failed_step"]) == (False, 1)
    assert plan["toolguard.plan.cause"] == "precondition"  # on the fork after step 0
    assert "/x" not in plan["toolguard.plan.message"]  # no value without opt-in
    for span in steps:
        assert span.parent is not None and span.parent.span_id == plans[0].context.span_id
        assert "toolguard.step" not in span.attributes
        assert span.attributes["gen_ai.operation.name"] == "verify_plan"
    assert [s.attributes["toolguard.plan.step"] for s in steps] == [0, 1]


def test_async_tools_run_on_the_fork_with_averify_plan(otel: Telemetry) -> None:
    guard, disk = disk_guard(otel, dry_run=True)
    plan = [
        tg.PlanStep("cd", {"name": "/home"}),
        tg.PlanStep("als", id="l"),
        tg.PlanStep("rm", {"path": tg.StepRef("l", "entries.0.path")}),
    ]
    verdict = asyncio.run(guard.averify_plan(plan))
    assert verdict.ok and [s.ran_on_fork for s in verdict.steps] == [True, True, True]
    # The sync verify cannot await it: said, and the rest is checked without the fork.
    verdict = guard.verify_plan(plan)
    assert verdict.ok and "averify_plan" in verdict.steps[1].unchecked[0]
    assert disk.runs == 0
