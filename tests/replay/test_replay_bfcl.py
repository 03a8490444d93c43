"""BFCL multi-turn result files: strict reading, and replay on BFCL's own backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolguard.replay import ReplayInputError, bfcl, bfcl_env, read_runs

# multi_turn_base_0's ground truth (BFCL's possible answer), as a prompting model writes it,
# each turn closed by chatter that decodes to no call.
GROUND_TRUTH = [
    [
        "[cd(folder='document'), mkdir(dir_name='temp'), "
        "mv(source='final_report.pdf', destination='temp')]",
        "I moved the report.",
    ],
    ["[cd(folder='temp'), grep(file_name='final_report.pdf',pattern='budget analysis')]"],
    ["[sort('final_report.pdf')]", "Sorted."],
    [
        "[cd(folder='..'), mv(source='previous_report.pdf',destination='temp'), "
        "cd(folder='temp'), diff(file_name1='final_report.pdf',file_name2='previous_report.pdf')]"
    ],
]
# The same task from a function-calling model that goes wrong at once: a folder that does not
# exist, then an argument the function does not take, then a good call.
FC_RUN = [
    [[{"cd": json.dumps({"folder": "nope"})}], [{"ls": "{}"}]],
    [[{"cd": {"dir": "document"}}, {"cd": json.dumps({"folder": "document"})}]],
    [],
    [],
]


def result_file(path: Path, entries: list[tuple[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": i, "result": r}) + "\n" for i, r in entries))
    return path


def test_calls_are_parsed_as_literals_never_evaluated() -> None:
    assert bfcl.parse_call("sort('f.txt')") == bfcl.Call("sort", ("f.txt",))
    assert bfcl.parse_call("GorillaFileSystem.cd(folder='a')").name == "cd"
    for text in ("cat(file_name=__import__('os').getcwd())", "f(**x)", "x.y[0]()", "1 + 2"):
        with pytest.raises(bfcl.CallParseError):
            bfcl.parse_call(text)
    steps = bfcl.decode_steps([["[ls(), cd(folder='a')]", "Done!"], [[{"pwd": "{}"}]]])
    assert [(t, [c.name for c in calls]) for t, calls in steps] == [(0, ["ls", "cd"]), (1, ["pwd"])]


def test_a_step_nested_past_the_parser_is_no_call_not_a_crash() -> None:
    """A model's text the parser cannot take (nested too deep to parse, or to write back) is
    chatter, as an undecodable step is: the replay goes on."""
    deep = [
        "[ls(a=" + "-" * 500 + "1)]",  # parses, but ast.unparse recurses past the limit
        ["ls(a=" + "1+" * 100_000 + "1)"],  # RecursionError while parsing
        ["ls(a=" + "-" * 100_000 + "1)"],  # the parser's "too complex" MemoryError
    ]
    steps = bfcl.decode_steps([[*deep, "[pwd()]"]])
    assert [(t, [c.name for c in calls]) for t, calls in steps] == [(0, ["pwd"])]


def test_the_harness_reads_through_the_moved_code(tmp_path: Path) -> None:
    results = pytest.importorskip("benchmarks.bfcl.results")
    data = pytest.importorskip("benchmarks.bfcl.data")
    assert results.read_result_file is bfcl.read_result_file
    assert data.parse_call is bfcl.parse_call and data.Call is bfcl.Call
    path = result_file(tmp_path / "r.json", [("multi_turn_base_0", GROUND_TRUTH)])
    calls = results.read_result_file(path)["multi_turn_base_0"]
    assert len(calls) == 10 and calls[-1] == (3, bfcl.parse_call(
        "diff(file_name1='final_report.pdf',file_name2='previous_report.pdf')"))  # fmt: skip


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        (['{"id": "multi_turn_base_0", "result": [["ls()"]]}', "{oops"], r":2: not valid JSON"),
        (['{"id": "multi_turn_base_0"}'], r":1: a BFCL result line is an object with 'id'"),
        (['{"id": "multi_turn_base_0", "result": {"turns": []}}'], r":1: 'result'"),
        (
            [
                '{"id": "multi_turn_base_0", "result": [["Sure!"]]}',
                '{"id": "multi_turn_base_1", "result": [[]]}',
            ],
            r"none of its 2 entries decodes to a tool call",
        ),
        ([], r"no BFCL result entry"),
    ],
)
def test_a_malformed_result_file_is_an_error_not_ter_1(
    tmp_path: Path, lines: list[str], why: str
) -> None:
    path = tmp_path / "BFCL_v4_multi_turn_base_result.json"
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(ReplayInputError, match=why):
        list(read_runs("bfcl", [path]))
    with pytest.raises(ReplayInputError, match=why):
        bfcl.read_result_file(path)


def test_skip_invalid_passes_over_a_bad_line(tmp_path: Path, replay: Any) -> None:
    path = tmp_path / "m" / "BFCL_v4_multi_turn_base_result.json"
    result_file(path, [("multi_turn_base_0", GROUND_TRUTH)])
    path.write_text(path.read_text() + "{oops\n")
    done = replay("bfcl", [path], skip_invalid=True)
    assert done.stats.skipped == 1 and ":2: not valid JSON" in (done.stats.first_skipped or "")
    assert list(done.figures()) == ["m/multi_turn_base_0"]


def test_without_bfcl_eval_only_a_contract_can_fail_a_call(
    tmp_path: Path, replay: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bfcl_env, "available", lambda: False)
    path = result_file(
        tmp_path / "m" / "r.json",
        [("multi_turn_base_0", FC_RUN), ("multi_turn_base_1", [["I cannot do that."], []])],
    )
    run, _ = read_runs("bfcl", [path])
    assert run.environment is None and run.tools is None
    done = replay("bfcl", [path])
    # Nothing answers the calls: every one is valid; the chatter-only entry has T = 0.
    assert done.figures() == {"m/multi_turn_base_0": (4, 5), "m/multi_turn_base_1": (0, 1)}
    assert done.stats.without_environment == 2


needs_bfcl = pytest.mark.skipif(
    not bfcl_env.available(), reason="bfcl-eval not installed (make test installs it)"
)


@needs_bfcl
def test_replay_on_bfcl_s_own_backends(tmp_path: Path, replay: Any) -> None:
    gt = result_file(
        tmp_path / "prompting-model" / "multi_turn" / "BFCL_v4_multi_turn_base_result.json",
        [("multi_turn_base_0", GROUND_TRUTH)],
    )
    fc = result_file(
        tmp_path / "fc-model" / "BFCL_v4_multi_turn_base_result.json",
        [("multi_turn_base_0", FC_RUN)],
    )
    contract = tmp_path / "empty.toml"
    contract.write_text('mode = "block"\n')
    done = replay("bfcl", [gt, fc], contract=contract)
    # The ground truth runs cleanly: T = 10 calls, FED = T + 1. The function-calling run's
    # first call is refused by the backend ({"error": "cd: 'nope': ..."}).
    assert done.figures("environment") == {
        "prompting-model/multi_turn_base_0": (10, 11),
        "fc-model/multi_turn_base_0": (4, 1),
    }
    env = done.group(replay="environment")
    assert env["ter"] == 0.5 and env["auc_pec"] == pytest.approx((10 / 10 + 0 / 4) / 2)
    assert env["mean_fed"] == pytest.approx((11 + 1) / 2) and env["n_outcome_known"] == 0
    record = done.records["environment/fc-model/multi_turn_base_0"]
    assert record.first_error_cause == "state_consistency" and record.success is None
    assert record.labels == {
        "bfcl_eval": bfcl_env.version(),  # whose backends and data answered
        "category": "base",
        "model": "fc-model",
        "replay": "environment",
        "run": "fc-model/multi_turn_base_0",
        "task": "multi_turn_base_0",
    }
    # With BFCL's function docs as schemas, `cd(dir=...)` is a schema error before it runs.
    from opentelemetry.sdk.trace import TracerProvider

    import toolguard as tg
    from toolguard.replay import Replayer

    runs = {r.id: r for r in read_runs("bfcl", [gt, fc])}
    replayer = Replayer(TracerProvider(), contract=tg.load_contract(contract))
    what_if = replayer.replay(runs["fc-model/multi_turn_base_0"], "with_contract")
    verdicts = sorted(what_if.verdicts, key=lambda v: v.step or 0)
    assert [(v.step, v.cause, v.decision) for v in verdicts] == [
        (1, "state_consistency", "allowed"),  # ran, and the backend refused it
        (2, None, "allowed"),
        (3, "schema", "blocked"),  # unknown argument `dir`: the backend never saw it
        (4, None, "allowed"),
    ]
    gt_what_if = replayer.replay(runs["prompting-model/multi_turn_base_0"], "with_contract")
    assert (gt_what_if.length, gt_what_if.first_error_depth) == (10, 11)
