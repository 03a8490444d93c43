"""`toolguard replay` on hostile input: answers nested deeper than the JSON parser's stack, a
contract whose rules name arguments the recorded calls never carry. A clear message, never a
traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chatlog import calls, tool, user, write_jsonl

from toolguard.replay.bfcl import CallParseError, decode_step
from toolguard.replay.bfcl_scores import load
from toolguard.replay.cli import main
from toolguard.replay.model import ReplayInputError

_DEEP = "[" * 5000 + "]" * 5000  # deeper than the json module's stack: a RecursionError


def _runs(tmp_path: Path) -> Path:
    rows = [
        {
            "id": f"r{i}",
            "messages": [
                user("cancel my order"),
                calls(("c1", "find_order", {"q": f"order {i}"})),
                tool("c1", {"order_id": f"ORD-{i}"}),
                calls(("c2", "cancel", {"order_id": f"ORD-{i}"})),
                tool("c2", "ok"),
            ],
        }
        for i in range(3)
    ]
    return write_jsonl(tmp_path / "runs.jsonl", rows)


def test_an_answer_nested_past_the_parsers_stack_stays_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"id": "r", "messages": [user("go"), calls(("c1", "f", {"x": 1})), tool("c1", _DEEP)]}
    log = write_jsonl(tmp_path / "runs.jsonl", [row])
    contract = tmp_path / "c.toml"
    contract.write_text('[tools.f]\nproduces = { "$" = "thing" }\n')
    out = tmp_path / "spans.jsonl"
    assert (
        main(["openai", str(log), "--out", str(out), "--quiet", "--contract", str(contract)]) == 0
    )
    assert "Traceback" not in capsys.readouterr().err


def test_bfcl_arguments_nested_past_the_parsers_stack_are_no_call() -> None:
    with pytest.raises(CallParseError, match="arguments of 'f' are not an object"):
        decode_step([{"f": _DEEP}])


def test_a_bfcl_score_file_nested_past_the_parsers_stack(tmp_path: Path) -> None:
    path = tmp_path / "score.json"
    path.write_text('{"accuracy": 0.5, "total_count": 1}\n' + _DEEP + "\n")
    with pytest.raises(ReplayInputError, match=f"{path}:2: not valid JSON"):
        load(path)


@pytest.mark.parametrize(
    ("rules", "named"),
    [
        ('refs = { orderid = "order_id" }', "cancel.orderid (refs)"),
        ('refs = { "order.id" = "order_id" }', "cancel.order.id (refs)"),
        ('refs = { "orders[].id" = "order_id" }', "cancel.orders[].id (refs)"),
        ('grounded = ["reason"]', "cancel.reason (grounded)"),
    ],
)
def test_a_contract_argument_no_recorded_call_carries_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rules: str, named: str
) -> None:
    # The runs record no schema: the guard cannot tell the argument is not the tool's, so
    # the rule would check nothing, in silence.
    contract = tmp_path / "c.toml"
    contract.write_text(
        f'[tools.cancel]\n{rules}\n[tools.find_order]\nproduces = {{ order_id = "order_id" }}\n'
    )
    out = tmp_path / "spans.jsonl"
    args = ["openai", str(_runs(tmp_path)), "--out", str(out), "--contract", str(contract)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "names argument(s) that no replayed call of their tool carried" in err
    assert err.count(named) == 1


def test_a_contract_whose_arguments_the_calls_carry_is_not_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = tmp_path / "c.toml"
    contract.write_text(
        '[tools.cancel]\nrefs = { order_id = "order_id" }\n'
        '[tools.find_order]\nproduces = { order_id = "order_id" }\ngrounded = ["q"]\n'
    )
    out = tmp_path / "spans.jsonl"
    args = ["openai", str(_runs(tmp_path)), "--out", str(out), "--contract", str(contract)]
    assert main(args) == 0
    assert "no replayed call" not in capsys.readouterr().err


def test_appending_to_a_span_file_holding_a_line_nested_past_the_parsers_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "spans.jsonl"
    out.write_text('{"resourceSpans": []}\n' + _DEEP + "\n")
    assert main(["openai", str(_runs(tmp_path)), "--out", str(out), "--quiet", "--append"]) == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"$ref": "#/x"}, "its JSON Schema's $ref '#/x' does not resolve within the schema"),
        ({"type": 5}, "its JSON Schema is invalid at type: 5 is not valid under any"),
    ],
)
def test_a_recorded_schema_that_cannot_check_a_call_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schema: dict[str, object], why: str
) -> None:
    # The recording's fault, named with the run: not a traceback at the first call, and not
    # an error blaming the contract file.
    row = {
        "id": "r",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}],
        "messages": [user("go"), calls(("c1", "f", {"x": 1})), tool("c1", "ok")],
    }
    log = write_jsonl(tmp_path / "runs.jsonl", [row])
    contract = tmp_path / "c.toml"
    contract.write_text('[tools.f]\nrefs = { x = "thing" }\n')
    out = tmp_path / "spans.jsonl"
    assert (
        main(["openai", str(log), "--out", str(out), "--quiet", "--contract", str(contract)]) == 2
    )
    err = capsys.readouterr().err
    assert f"{log}:1 (run 1): tool 'f': {why}" in err
    assert str(contract) not in err
    assert "Traceback" not in err


_CHAT_LINE = {"id": "r", "messages": [{"role": "user", "content": "hi"}]}
_BFCL_LINE = {"id": "multi_turn_base_0", "result": [["ls()"]]}
_SPAN_LINE: dict[str, object] = {"resourceSpans": []}
_TAU2_DOC: dict[str, object] = {"info": {}, "simulations": []}


@pytest.mark.parametrize(
    ("format", "content", "hint"),
    [
        ("openai", json.dumps(_TAU2_DOC), "; it looks like the tau2 format"),
        ("openai", json.dumps(_BFCL_LINE), "; it looks like the bfcl format"),
        ("openai", json.dumps(_SPAN_LINE), "; it looks like a span file (OTLP JSON)"),
        ("tau2", json.dumps([_SPAN_LINE]), "; it looks like a span file (OTLP JSON)"),
        ("bfcl", json.dumps(_CHAT_LINE), "; it looks like the openai format"),
        ("bfcl", json.dumps(_TAU2_DOC, indent=2), "; the file is one JSON document over several"),
    ],
)
def test_a_file_of_another_format_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], format: str, content: str, hint: str
) -> None:
    # The common mistake of mixing formats in one call: the error says which format the file
    # looks like, not only which key is missing.
    path = tmp_path / "runs.json"
    path.write_text(content + "\n")
    assert main([format, str(path), "--out", str(tmp_path / "spans.jsonl"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"toolguard: error: {path}:1" in err and hint in err


@pytest.mark.parametrize("append", [False, True])
def test_out_naming_an_input_is_refused_and_the_input_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], append: bool
) -> None:
    log = _runs(tmp_path)
    recorded = log.read_bytes()
    (tmp_path / "sub").mkdir()
    other = tmp_path / "sub" / ".." / log.name  # the same file by another path
    argv = ["openai", str(log), "--out", str(other), "--quiet", *(["--append"] * append)]
    assert main(argv) == 2
    assert f"--out {other} is the input {log}: writing the spans there would lose it" in (
        capsys.readouterr().err
    )
    assert log.read_bytes() == recorded


def test_tool_calls_that_are_not_a_list_are_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"id": "r", "messages": [user("go"), {"role": "assistant", "tool_calls": 1}]}
    log = write_jsonl(tmp_path / "runs.jsonl", [row])
    assert main(["openai", str(log), "--out", str(tmp_path / "spans.jsonl"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{log}:1 (run 1): message 1: tool_calls is a int, not a list" in err


def test_tau2_tool_defs_whose_params_are_no_schema_are_no_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    simulation = {
        "id": "s",
        "messages": [user("go"), calls(("c1", "f", {"x": 1})), tool("c1", "ok")],
    }
    doc = {
        "info": {"environment_info": {"tool_defs": {"f": {"params": 5}}}},
        "simulations": [simulation],
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    contract = tmp_path / "c.toml"
    contract.write_text('[tools.f]\nrefs = { x = "thing" }\n')
    out = tmp_path / "spans.jsonl"
    assert main(["tau2", str(path), "--out", str(out), "--quiet", "--contract", str(contract)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_no_control_character_of_the_input_reaches_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"id": "r", "messages": [user("hi")]}
    log = write_jsonl(tmp_path / "runs.jsonl", [{"\x1b]0;owned\x07": 1}, good])
    out = str(tmp_path / "spans.jsonl")
    assert main(["openai", str(log), "--out", out]) == 2
    first = capsys.readouterr().err
    assert main(["openai", str(log), "--out", out, "--skip-invalid"]) == 0
    skipped = capsys.readouterr().err
    for err in (first, skipped):
        assert "\x1b" not in err and "\\x1b]0;owned\\x07" in err


def test_a_toolsandbox_summary_nested_past_the_parsers_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "agent_m_user_u_01_01_2026_00_00_00"
    scenario = run_dir / "trajectories" / "s1"
    scenario.mkdir(parents=True)
    (scenario / "conversation.json").write_text(json.dumps([user("hi")]))
    (run_dir / "result_summary.json").write_text('{"per_scenario_results": ' + _DEEP + "}")
    assert main(["toolsandbox", str(run_dir), "--out", str(tmp_path / "spans.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{run_dir / 'result_summary.json'}: cannot read a ToolSandbox summary" in err
    assert "Traceback" not in err


def test_a_replay_label_that_would_merge_the_readings_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "spans.jsonl"
    argv = ["openai", str(_runs(tmp_path)), "--out", str(out), "--labels", "replay=mine"]
    assert main(argv) == 2
    assert "labels: 'replay' is the reading each trajectory is" in capsys.readouterr().err
    assert not out.exists()


def test_run_ids_made_unique_stay_unique_past_recorded_ones(tmp_path: Path) -> None:
    import toolguard as tg

    rows = [{"id": i, "messages": [user("hi")]} for i in ["r0", "r0", "r0~2", "r0"]]
    log = write_jsonl(tmp_path / "runs.jsonl", rows)
    out = tmp_path / "spans.jsonl"
    assert main(["openai", str(log), "--out", str(out), "--quiet"]) == 0
    records, _ = tg.read_records([str(out)])
    assert len(records) == 4 and not any(r.disagreements for r in records)


@pytest.mark.parametrize("given", ["a file", "nothing", "an empty folder"])
def test_a_bfcl_scores_path_that_is_no_score_folder_is_named(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    given: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # a result file named without its model's folder
    result = Path("BFCL_v4_multi_turn_base_result.json")
    result.write_text(json.dumps(_BFCL_LINE) + "\n")
    scores = Path("scores")
    if given == "a file":
        scores.write_text("{}")
    elif given == "an empty folder":
        scores.mkdir()
    argv = ["bfcl", str(result), "--out", str(tmp_path / "s.jsonl"), "--bfcl-scores", str(scores)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    if given == "an empty folder":
        looked = scores / "multi_turn" / "BFCL_v4_multi_turn_base_score.json"
        assert err.count(str(looked)) == 1  # each place looked in named once
    else:
        what = "is a file" if given == "a file" else "does not exist"
        assert f"--bfcl-scores {scores} {what}: give BFCL's score folder" in err


@pytest.mark.parametrize("append", [False, True])
@pytest.mark.parametrize("where", ["a folder", "under a file"])
def test_an_out_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], append: bool, where: str
) -> None:
    blocker = tmp_path / "blocker"
    if where == "a folder":
        blocker.mkdir()
        out = blocker
    else:
        blocker.write_text("")
        out = blocker / "spans.jsonl"
    argv = ["openai", str(_runs(tmp_path)), "--out", str(out), "--quiet", *["--append"] * append]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"toolguard: error: {out}: cannot write the spans: " in err
    assert "Traceback" not in err and not list(tmp_path.glob("*.part"))
