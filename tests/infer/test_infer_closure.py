"""The place closure (``toolguard/infer/closure.py``): a place that only ever held one kind's
values joins the kind, so a replay binds the values the greedy cover never needed. Each
test shows the rule with its switch off too."""

from __future__ import annotations

import tempfile
import tomllib
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

import toolguard as tg
from toolguard.infer import CommonRule, propose, render, trace_runs
from toolguard.replay.engine import WITH_CONTRACT, Replayer
from toolguard.replay.model import Answer, RecordedCall, RecordedRun, Said, Turn


def _call(name: str, arguments: dict[str, Any], result: Any) -> Turn:
    return Turn([RecordedCall(name, arguments, "c", Answer(result, False))])


def _state(stocks: list[str], watch: list[str]) -> dict[str, Any]:
    return {"Bot": {"stocks": {s: {"price": 120.5} for s in stocks}, "watch_list": watch}}


def _training(i: int, stray: bool = False, watched: str | None = None) -> RecordedRun:
    """One run: the user's watch list (``WAT<i>``, or ``watched``), which ``list_watch``
    shows, then a quote of a listed stock and of the watched symbol as the result showed it.
    ``stray``: the initial watch list also holds a symbol no place of the kind ever held."""
    watch = watched or f"WAT{i}"
    listed = [watch, f"ODD{i}"] if stray else [watch]
    return RecordedRun(
        f"t{i}",
        [
            Said("check my stocks"),
            _call("list_watch", {}, {"watchlist": [watch]}),
            _call("get_stock", {"symbol": f"AAA{i}"}, {"price": 1.5}),
            _call("get_stock", {"symbol": watch}, {"price": 2.5}),
        ],
        "test",
        initial=_state([f"AAA{i}", f"BBB{i}"], listed),
    )


def _held_out() -> RecordedRun:
    # A symbol of the initial watch list, named without listing the watch list first.
    return RecordedRun(
        "h",
        [Said("check my stocks"), _call("get_stock", {"symbol": "WAT9"}, {"price": 2.5})],
        "test",
        initial=_state(["AAA9"], ["WAT9"]),
    )


def _infer(runs: list[RecordedRun], **switches: bool) -> str:
    flow = trace_runs(runs, rule=CommonRule())
    rules = propose(flow, min_support=5, min_share=0.95, min_distinct=5, **switches)
    return render(rules, flow, min_support=5, min_share=0.95, min_distinct=5)


def _flags(run: RecordedRun, text: str) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "inferred.toml"
        path.write_text(text)
        replayer = Replayer(TracerProvider(), contract=tg.load_contract(path))
        return [str(v.check) for v in replayer.replay(run, WITH_CONTRACT).verdicts if not v.ok]


def test_a_place_holding_only_the_kinds_values_joins_it() -> None:
    runs = [_training(i) for i in range(6)]
    before = tomllib.loads(_infer(runs, place_closure=False))
    kind = before["tools"]["get_stock"]["refs"]["symbol"]
    # The cover needs the stocks' keys and list_watch's result, never the watch list itself.
    assert before["initial"] == {"Bot.stocks{}": kind}
    text = _infer(runs)
    assert tomllib.loads(text)["initial"] == {"Bot.stocks{}": kind, "Bot.watch_list[]": kind}
    assert "joined by value containment: held only this kind's values, in 6 trajectories" in text
    assert _flags(_held_out(), _infer(runs, place_closure=False)) == ["dependency.symbol"]
    assert _flags(_held_out(), text) == []


def test_a_place_that_held_a_value_outside_the_kind_does_not_join() -> None:
    # One run's watch list holds a symbol that no place of the kind held in that run.
    runs = [_training(i, stray=i == 0) for i in range(6)]
    assert "Bot.watch_list[]" not in tomllib.loads(_infer(runs))["initial"]


def test_a_place_with_fewer_distinct_values_than_min_distinct_does_not_join() -> None:
    # Six runs of one scenario: the watch list always held the same symbol.
    runs = [_training(i, watched="WATX") for i in range(6)]
    assert "Bot.watch_list[]" not in tomllib.loads(_infer(runs))["initial"]
