"""``tg.INHERIT``: a tool option left to the guard, so that None means the same everywhere."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest

import toolguard as tg


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def bump(self, by: int) -> int:
        self.n += by
        return self.n


def test_inherit_is_one_public_object() -> None:
    assert repr(tg.INHERIT) == "toolguard.INHERIT"
    assert tg.Inherit() is tg.INHERIT
    assert pickle.loads(pickle.dumps(tg.INHERIT)) is tg.INHERIT
    assert copy.deepcopy(tg.INHERIT) is tg.INHERIT
    spec = copy.deepcopy(tg.ToolSpec())
    for option in ("error_result", "mode", "strict", "dry_run"):
        assert getattr(spec, option) is tg.INHERIT, option


def test_error_result_none_on_a_tool_is_off_as_on_the_guard(otel: Any) -> None:
    guard = otel.guard(mode="block")

    @guard.tool
    def inherits() -> dict[str, str]:
        return {"error": "no such user"}

    @guard.tool(error_result=None)
    def off() -> dict[str, str]:
        return {"error": "no such user"}

    with otel.trajectory("t") as traj:
        guard.call("inherits")
        guard.call("off")
    assert [v.failed_checks for v in traj.verdicts] == [("state.error_result",), ()]
    # False means the same, on the guard too (it was refused there).
    assert tg.Guard(error_result=False).error_result is False


def test_dry_run_none_on_a_tool_is_no_dry_run() -> None:
    counter = Counter()
    guard = tg.Guard(state=counter, dry_run=tg.DeepCopyFork())
    guard.register(counter.bump, name="inherits")
    guard.register(counter.bump, name="none", dry_run=None)
    assert guard.get_tool("inherits").dry_run is guard.dry_run
    assert guard.get_tool("none").dry_run is None


def test_dry_run_true_on_a_tool_takes_the_guards_strategy() -> None:
    counter = Counter()
    strategy = tg.UndoLogFork()
    guard = tg.Guard(state=counter, dry_run=strategy)
    guard.register(counter.bump, dry_run=True)
    assert guard.get_tool("bump").dry_run is strategy
    alone = tg.Guard()
    alone.register(Counter().bump, dry_run=True)
    assert isinstance(alone.get_tool("bump").dry_run, tg.DeepCopyFork)  # none above: a copy


@pytest.mark.parametrize("option", ["mode", "strict"])
def test_none_for_an_option_the_guard_has_no_none_for_is_refused(option: str) -> None:
    guard = tg.Guard()
    loose: dict[str, Any] = {option: None}
    with pytest.raises(tg.ToolDefinitionError, match=f"{option} must be .*tg.INHERIT"):
        guard.register(Counter().bump, **loose)


def test_a_wrong_error_result_is_refused() -> None:
    loose: dict[str, Any] = {"error_result": "yes"}
    with pytest.raises(tg.ToolDefinitionError, match="error_result must be"):
        tg.Guard().register(Counter().bump, **loose)


def test_verify_plan_dry_run_none_forks_nothing() -> None:
    counter = Counter()
    guard = tg.Guard(state=counter)
    guard.register(counter.bump, dry_run=tg.DeepCopyFork())
    steps = [{"tool": "bump", "arguments": {"by": 1}}]
    assert guard.verify_plan(steps).dry_run is True  # INHERIT: the tool's own dry run
    assert guard.verify_plan(steps, dry_run=None).dry_run is False
    assert guard.verify_plan(steps, dry_run=False).dry_run is False
    assert counter.n == 0


def test_a_contract_file_leaves_unset_options_to_the_guard(tmp_path: Path) -> None:
    path = tmp_path / "contract.toml"
    path.write_text('[tools.a]\nrefs = { x = "k" }\n[tools.b]\nmode = "log"\nstrict = false\n')
    contract = tg.load_contract(path)
    a, b = contract.spec_for("a"), contract.spec_for("b")
    assert a.mode is tg.INHERIT and a.strict is tg.INHERIT
    assert (b.mode, b.strict) == ("log", False)
    guard = tg.Guard(mode="log", strict=False)
    assert guard.declare("a", a).spec.mode is tg.INHERIT
    assert guard.get_tool("a").schema is not None
