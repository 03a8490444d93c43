"""Values of the environment's initial state as a source: the contract file's ``[initial]``
table (``toolguard/runtime/initial_state.py``), what inference proposes for it, and what a
replay binds from it."""

from __future__ import annotations

import random
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import toolguard as tg
from toolguard.infer import CommonRule, propose, render, trace_runs
from toolguard.infer.cli import _parser
from toolguard.infer.propose import kind_name
from toolguard.infer.values import INITIAL
from toolguard.replay.engine import WITH_CONTRACT, Replayer
from toolguard.replay.model import Answer, RecordedCall, RecordedRun, Said, Turn
from toolguard.runtime.initial_state import candidate_places, finder

STATE = {
    "Shop": {
        "orders": {"12345": {"item": "lamp"}, "20001": {"item": "desk"}},
        "watch_list": ["NVDA", "AAPL"],
    },
    "Disk": {
        "root": {
            "home": {
                "type": "directory",
                "contents": {
                    "notes.txt": {"type": "file"},
                    "src": {"type": "directory", "contents": {"main.py": {"type": "file"}}},
                },
            }
        }
    },
    "Feed": {"posts": {"0": {"id": 0, "text": "hello"}}},
}


def test_places_find_leaves_keys_and_integer_keys() -> None:
    assert finder("Shop.orders{}")(STATE) == ["12345", 12345, "20001", 20001]
    assert finder("Shop.watch_list[]")(STATE) == ["NVDA", "AAPL"]
    assert finder("$.Shop.watch_list")(STATE) == ["NVDA", "AAPL"]
    # A key name: every mapping under "contents", nested ones too (a file tree).
    assert finder("contents{}")(STATE) == ["notes.txt", "src", "main.py"]
    assert finder("id")(STATE) == [0]
    assert finder("{}")(STATE) == ["Shop", "Disk", "Feed"]
    assert finder("Shop.missing{}")(STATE) == []
    assert finder("orders{}")([{"orders": ["not a mapping"]}]) == []


def test_candidate_places_are_exact_and_by_key_name() -> None:
    places = candidate_places(STATE)
    assert {"Shop.orders{}", "orders{}", "contents{}", "$.Shop{}"} <= set(places)
    assert places == sorted(places)


def _contract(tmp_path: Path, text: str) -> tg.Contract:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return tg.load_contract(path)


def test_contract_file_reads_the_initial_table(tmp_path: Path) -> None:
    c = _contract(tmp_path, '[initial]\n"Shop.orders{}" = "order_id"\n')
    assert c.initial == {"Shop.orders{}": "order_id"}
    assert list(c.initial_values(STATE))[:2] == [("order_id", "12345"), ("order_id", 12345)]
    assert list(c.initial_values(None)) == []
    assert _contract(tmp_path, 'mode = "log"\n').initial == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[initial]\n"$" = "k"\n', "the whole state binds nothing"),
        ('[initial]\n"a{}.b" = "k"\n', "'{}' may only end a place"),
        ('[initial]\n"a" = 3\n', 'must be a table of place = "kind" strings'),
        ('initial = "x"\n', 'must be a table of place = "kind" strings'),
    ],
)
def test_contract_file_refuses_a_bad_initial_place(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(tg.ContractFileError, match=message.replace("{", r"\{").replace("$", r"\$")):
        _contract(tmp_path, text)


def _order_run(i: int, order: Any, *, state: Any = STATE, placed: bool = False) -> RecordedRun:
    """A run that looks an order up: one of the initial state's, or (``placed``) one a call
    placed first."""
    calls = []
    if placed:
        calls.append(
            RecordedCall("place_order", {"item": "chair"}, "p", Answer({"order_id": order}, False))
        )
    calls.append(RecordedCall("get_order", {"order_id": order}, "g", Answer({"item": "x"}, False)))
    return RecordedRun(
        f"r{i:02d}", [Said("look my order up"), *(Turn([c]) for c in calls)], "test", initial=state
    )


def _infer(runs: list[RecordedRun], *, initial_state: bool = True, share: float = 0.95) -> str:
    flow = trace_runs(runs, rule=CommonRule(), initial_state=initial_state)
    rules = propose(flow, min_support=5, min_share=share, min_distinct=5)
    return render(rules, flow, min_support=5, min_share=share, min_distinct=5)


def _flags(runs: list[RecordedRun], text: str) -> list[tuple[str, int | None, str]]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "inferred.toml"
        path.write_text(text)
        replayer = Replayer(TracerProvider(), contract=tg.load_contract(path))
        out = []
        for run in runs:
            for v in replayer.replay(run, WITH_CONTRACT).verdicts:
                if not v.ok:
                    out.append((run.id, v.step, str(v.check)))
        return out


def _mixed() -> list[RecordedRun]:
    # Three of ten lookups name an order of the initial state, seven one placed first.
    return [_order_run(i, 12345 if i < 3 else 30000 + i, placed=i >= 3) for i in range(10)]


def test_ids_of_the_initial_state_complete_a_refs_rule(tmp_path: Path) -> None:
    runs = _mixed()
    # Without the source, 7 of 10 values came from a result: share 0.70, no rule.
    assert "refs" not in tomllib.loads(_infer(runs, initial_state=False)).get("tools", {}).get(
        "get_order", {}
    )
    text = _infer(runs)
    data = tomllib.loads(text)
    assert data["tools"]["get_order"]["refs"] == {"order_id": "order_id"}
    assert data["tools"]["place_order"]["produces"] == {"$.order_id": "order_id"}
    assert data["initial"] == {"Shop.orders{}": "order_id"}
    assert "values the environment's initial state held" in text
    assert _flags(runs, text) == []
    # An order neither placed nor in the initial state is flagged; one of the state's is not.
    invented = [_order_run(50, 99999), _order_run(51, 20001)]
    assert _flags(invented, text) == [("r50", 1, "dependency.order_id")]


def test_a_state_with_more_places_than_the_limit_is_not_traced_and_said_once() -> None:
    runs = _mixed()
    places = len(list(candidate_places(STATE)))
    at_limit = trace_runs(runs, rule=CommonRule(), max_initial_places=places)
    assert at_limit.initial_skipped == 0
    over = trace_runs(runs, rule=CommonRule(), max_initial_places=places - 1)
    assert over.initial_skipped == len(runs)
    over.warn_empty()
    (warning,) = [w for w in over.warnings if "initial state" in w]
    assert f"{len(runs)} run(s)" in warning
    assert f"'r00': {places} mapping places" in warning
    assert f"--max-initial-places {places - 1}" in warning
    # Not traced: the contract is the one inferred with the source off, the warning in its
    # header aside.
    rules = propose(over, min_support=5, min_share=0.95, min_distinct=5)
    text = render(rules, over, min_support=5, min_share=0.95, min_distinct=5)
    assert f"# warning: {warning}\n" in text
    assert text.replace(f"# warning: {warning}\n", "") == _infer(runs, initial_state=False)
    assert "[initial]" in _infer(runs)


def test_infer_cli_takes_the_initial_places_limit() -> None:
    assert _parser().parse_args(["r.json", "--out", "c.toml"]).max_initial_places == 5_000
    args = _parser().parse_args(["r.json", "--out", "c.toml", "--max-initial-places", "7"])
    assert args.max_initial_places == 7


def test_the_initial_state_is_bound_unshown(tmp_path: Path) -> None:
    contract = _contract(
        tmp_path,
        '[initial]\n"Shop.orders{}" = "order_id"\n[tools.get_order]\n'
        'refs = { order_id = "order_id" }\ngrounded = ["order_id"]\n',
    )
    replayer = Replayer(TracerProvider(), contract=contract)
    traj = replayer.replay(_order_run(0, 12345), WITH_CONTRACT)
    # The dependency passes, but the model never saw the id: the information check fails.
    assert [str(v.check) for v in traj.verdicts] == ["information.order_id"]
    # A run with no initial state binds nothing.
    bare = replayer.replay(_order_run(1, 12345, state=None), WITH_CONTRACT)
    assert [str(v.check) for v in bare.verdicts] == ["dependency.order_id"]


_SYMBOL = st.text(alphabet="ABCDEFGHIJ", min_size=3, max_size=5)


@st.composite
def _stock_run(draw: st.DrawFn, index: int) -> RecordedRun:
    """A run that never failed: an initial watch list and order book, lookups of listed
    symbols and of orders that exist or were placed."""
    symbols = draw(st.lists(_SYMBOL, min_size=1, max_size=4, unique=True))
    orders = draw(st.lists(st.integers(100, 999), min_size=0, max_size=3, unique=True))
    state = {"Bot": {"watch_list": symbols, "orders": {str(o): {"n": 1} for o in orders}}}
    events: list[Said | Turn] = [Said("check my stocks")]
    known = list(orders)
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["stock", "order", "place"]))
        if op == "stock":
            call = RecordedCall("get_stock", {"symbol": draw(st.sampled_from(symbols))})
        elif op == "order" and known:
            call = RecordedCall("get_order", {"order_id": draw(st.sampled_from(known))})
        else:
            new = draw(st.integers(1000, 9999))
            known.append(new)
            call = RecordedCall("place_order", {"n": 1})
            call.answer = Answer({"order_id": new}, False)
        if call.answer is None:
            call.answer = Answer({"ok": True}, False)
        events.append(Turn([call]))
    return RecordedRun(f"run{index:03d}", events, "test", initial=state)


@st.composite
def _stock_runs(draw: st.DrawFn) -> list[RecordedRun]:
    return [draw(_stock_run(i)) for i in range(draw(st.integers(1, 20)))]


def _infer_at(runs: list[RecordedRun], support: int, share: float) -> str:
    flow = trace_runs(runs, rule=CommonRule())
    rules = propose(flow, min_support=support, min_share=share, min_distinct=support)
    return render(rules, flow, min_support=support, min_share=share, min_distinct=support)


@settings(max_examples=30, deadline=None)
@given(runs=_stock_runs(), seed=st.integers(0, 2**16), support=st.integers(1, 4))
def test_with_initial_states_the_output_is_deterministic_and_order_free(
    runs: list[RecordedRun], seed: int, support: int
) -> None:
    shuffled = list(runs)
    random.Random(seed).shuffle(shuffled)
    a = _infer_at(runs, support, 0.95)
    assert a == _infer_at(runs, support, 0.95) == _infer_at(shuffled, support, 0.95)


@settings(max_examples=30, deadline=None)
@given(runs=_stock_runs(), support=st.integers(1, 3))
def test_with_initial_states_inferred_from_runs_that_never_failed_flags_none(
    runs: list[RecordedRun], support: int
) -> None:
    text = _infer_at(runs, support, 1.0)
    assert _flags(runs, text) == []


def test_a_maps_values_are_offered_only_where_all_are_scalars() -> None:
    places = candidate_places({"M": {"user_map": {"Ann": "U1", "Bob": "U2"}, "n": 3}})
    assert "M.user_map.*" in places and "user_map.*" in places
    assert "$.M.*" not in places  # an object's fields of every kind
    assert finder("user_map.*")({"M": {"user_map": {"Ann": "U1", "Bob": "U2"}}}) == ["U1", "U2"]


def test_a_collection_of_the_state_wins_over_a_lone_field_that_equals_the_id() -> None:
    # The counter holds the next order's id, which equals the looked-up order by chance.
    state = {"Shop": {"order_counter": 12345, "orders": {"12345": {"item": "lamp"}}}}
    runs = [_order_run(i, 12345, state=state) for i in range(6)]
    data = tomllib.loads(_infer(runs))
    assert data["initial"] == {"Shop.orders{}": "order_key"}


def test_bfcl_initial_state_is_the_config_with_the_backends_plain_defaults() -> None:
    bfcl_env = pytest.importorskip("toolguard.replay.bfcl_env")
    if not bfcl_env.available():
        pytest.skip("bfcl-eval is not installed")
    task = bfcl_env.task("multi_turn_base_132")
    assert task is not None
    state = bfcl_env.initial_state(task)
    trading = state["TradingBot"]
    assert "orders" not in task["initial_config"]["TradingBot"]
    assert {12345, 12446} <= set(trading["orders"])  # DEFAULT_STATE's, as _load_scenario
    assert trading["order_counter"] == task["initial_config"]["TradingBot"]["order_counter"]
    fs = bfcl_env.initial_state(bfcl_env.task("multi_turn_base_0") or {})
    assert isinstance(fs["GorillaFileSystem"]["root"], dict)  # the config's, as data


def test_kinds_of_the_initial_state_are_named_after_their_mapping() -> None:
    assert kind_name((INITIAL, "TradingBot.orders{}")) == "order_key"
    assert kind_name((INITIAL, "contents{}")) == "content_key"
    assert kind_name((INITIAL, "MessageAPI.user_map.*")) == "user_map_value"
    assert kind_name((INITIAL, "TicketAPI.ticket_queue[].id")) == "ticket_queue_id"
