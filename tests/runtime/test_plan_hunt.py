"""verify_plan and its references against hostile plans: what a planner may write must come
back as a verdict (or a PlanRefError when resolving), never as an exception from the guard."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolguard as tg

if TYPE_CHECKING:  # the root conftest's type
    from conftest import Telemetry


class Disk:
    def __init__(self) -> None:
        self.dirs = {"/"}

    def ls(self) -> dict[Any, Any]:
        return {"entries": [{"path": p} for p in sorted(self.dirs)], 1: "one"}

    def cd(self, path: str) -> str:
        return path


def _guard() -> tuple[tg.Guard, Disk]:
    disk = Disk()
    guard = tg.Guard(state=disk, dry_run=tg.DeepCopyFork())
    guard.proxy(disk, tools=["ls", "cd"])
    return guard, disk


# Segments that str.isdigit() calls digits but int() refuses: a superscript, a number longer
# than Python converts from text. Each is a path the result does not have, not a crash.
_ODD_SEGMENTS = st.sampled_from(["²", "0²", "-²", "9" * 5000, "-" + "1" * 4400, "①"])


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(segment=_ODD_SEGMENTS, prefix=st.sampled_from(["", "entries.", "entries.0."]))
def test_a_path_segment_int_refuses_is_a_path_the_result_lacks(segment: str, prefix: str) -> None:
    guard, disk = _guard()
    path = prefix + segment
    plan: list[dict[str, Any]] = [
        {"tool": "ls"},
        {"tool": "cd", "arguments": {"path": {"$step": 0, "path": path}}},
    ]
    verdict = guard.verify_plan(plan)
    assert not verdict.ok and verdict.failed == 1
    assert verdict.cause == "dependency"
    assert "does not have" in str(verdict)
    with pytest.raises(tg.PlanRefError, match="names nothing"):
        tg.resolve_plan_refs({"path": {"$step": 0, "path": path}}, [disk.ls()])


def test_plain_ascii_indexes_still_resolve() -> None:
    guard, disk = _guard()
    plan: list[dict[str, Any]] = [
        {"tool": "ls"},
        {"tool": "cd", "arguments": {"path": {"$step": 0, "path": "entries.-1.path"}}},
        {"tool": "cd", "arguments": {"path": {"$step": 0, "path": "1"}}},  # an int key
    ]
    assert guard.verify_plan(plan).ok
    assert tg.resolve_plan_refs({"p": {"$step": 0, "path": "entries.0.path"}}, [disk.ls()]) == {
        "p": "/"
    }


class Files:
    def __init__(self) -> None:
        self.files = {"/a": "x"}

    def rm(self, path: str) -> str:
        if path not in self.files:
            raise FileNotFoundError(f"rm: {path}: no such file")
        del self.files[path]
        return path

    def cat(self, path: str) -> str:
        if path not in self.files:
            raise FileNotFoundError(f"cat: {path}: no such file")
        return self.files[path]


_STRATEGIES = [tg.DeepCopyFork, tg.UndoLogFork]


@pytest.mark.parametrize("rm_fork", _STRATEGIES)
@pytest.mark.parametrize("cat_fork", _STRATEGIES)
def test_tools_forking_one_object_by_their_own_strategies_share_the_plan_state(
    rm_fork: type[tg.ForkStrategy], cat_fork: type[tg.ForkStrategy]
) -> None:
    # Two strategy objects (one per tool) on the same object: a second fork of it would
    # miss what the first step did there, and `cat` would pass on a file `rm` removed.
    files = Files()
    guard = tg.Guard(state=files)
    guard.register(files.rm, dry_run=rm_fork())
    guard.register(files.cat, dry_run=cat_fork())
    plan = [tg.PlanStep("rm", {"path": "/a"}), tg.PlanStep("cat", {"path": "/a"})]
    verdict = guard.verify_plan(plan, dry_run=True)
    assert files.files == {"/a": "x"}
    if rm_fork is cat_fork:  # the same kind of fork: one fork, run on as one
        assert not verdict.ok and verdict.failed == 1 and verdict.check == "state.dry_run"
        assert "cat: /a: no such file" in str(verdict)
    else:  # forked apart: `cat` is not run there, and the verdict does not pretend it was
        assert [s.ran_on_fork for s in verdict.steps] == [True, False]
        assert any("forked already" in note for note in verdict.steps[1].unchecked)


def _nesting_guard(otel: Telemetry) -> tuple[tg.Guard, dict[str, list[str]]]:
    state: dict[str, list[str]] = {"dirs": ["/"]}
    guard: tg.Guard = otel.guard(state=state, dry_run=tg.UndoLogFork())

    @guard.tool(produces={"path": "dir"})
    def mkdir(path: str, s: Annotated[dict[str, list[str]], tg.State]) -> dict[str, str]:
        s["dirs"].append(path)
        return {"path": path}

    @guard.tool
    def mkdirs(a: str, s: Annotated[dict[str, list[str]], tg.State]) -> str:
        guard.call("mkdir", {"path": a})  # a guarded tool calling another: no step
        if a == "/bad":
            raise ValueError("mkdirs: /bad refused")
        return "ok"

    return guard, state


def test_verify_plan_for_a_given_trajectory_takes_no_step_in_the_current_one(
    otel: Telemetry,
) -> None:
    guard, state = _nesting_guard(otel)
    given = otel.trajectory("given")
    with otel.trajectory("other") as other:
        verdict = guard.verify_plan([tg.PlanStep("mkdirs", {"a": "/x"})], trajectory=given)
        assert verdict.ok and verdict.steps[0].ran_on_fork
        # The nested mkdir ran inside the plan's fork: no step, no binding, anywhere.
        assert (other.length, given.length) == (0, 0)
        assert other.live_values("dir") == [] and given.live_values("dir") == []
    assert state == {"dirs": ["/"]}
    assert otel.call_spans("other") == [] and otel.call_spans("given") == []


def test_a_rejected_dry_run_for_a_given_trajectory_takes_no_step_in_the_current_one(
    otel: Telemetry,
) -> None:
    state: dict[str, list[str]] = {"dirs": ["/"]}
    guard: tg.Guard = otel.guard(state=state, dry_run=tg.DeepCopyFork())

    @guard.tool(produces={"$": "tag"}, dry_run=False)
    def tag(text: str) -> str:
        return text

    @guard.tool
    def mkdir(path: str, s: Annotated[dict[str, list[str]], tg.State]) -> str:
        guard.call("tag", {"text": path})  # on the copy: part of the dry run, no step
        if path in s["dirs"]:
            raise FileExistsError(f"mkdir: {path}: exists")
        s["dirs"].append(path)
        return path

    given = otel.trajectory("given")
    with otel.trajectory("other") as other:
        rejected = guard.call("mkdir", {"path": "/"}, trajectory=given)
        assert isinstance(rejected, tg.Rejection) and "mkdir: /: exists" in str(rejected)
        assert other.length == 0 and other.live_values("tag") == []
        assert given.length == 1  # the call itself, once
    assert state == {"dirs": ["/"]}
    assert otel.call_spans("other") == []
