"""`toolguard infer` on hostile recordings: names that try to leave their comment, span files
with attributes of the wrong type, arguments nested deeper than any parser's stack. Always a
contract that parses (or an empty one with a warning), exit status 0, never a traceback."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest
from runs import run, write

import toolguard as tg
from toolguard.__main__ import main

# A newline ends a TOML comment: what follows it would be read as the contract's own keys.
_BREAK_OUT = '\nmode = "block"\n[tools.injected]\nrefs = { x = "y" }\n#'
_ARG_BREAK_OUT = '\nmode = "block"\nstrict = false\n#'  # no '.' or '[]': one argument


def test_names_from_the_recording_stay_inside_their_comments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    find, cancel = f"find{_BREAK_OUT}", f"cancel\u2028{_BREAK_OUT}"
    arg = f"order_id{_ARG_BREAK_OUT}\x1b"
    rows = [
        run(
            f"r{i}{_BREAK_OUT}",
            "cancel my order",
            (find, {"q": f"query {i}"}, {"order_id": f"ORD-{1000 + i}"}),
            (cancel, {arg: f"ORD-{1000 + i}"}, {"ok": True}),
            ("broken" + _BREAK_OUT, {"k" + _BREAK_OUT: "v"}, {}),
            error_at=2,
        )
        for i in range(6)
    ]
    out = tmp_path / "c.toml"
    assert main(["infer", write(str(tmp_path), rows), "--out", str(out), "--explain"]) == 0
    printed = capsys.readouterr()
    assert "\x1b" not in printed.out + printed.err and "Traceback" not in printed.err
    assert "\u2028" not in printed.out and "cancel\\u2028" in printed.out
    text = out.read_text(encoding="utf-8")
    data = tomllib.loads(text)  # parses: no line of a name became a key
    assert data["mode"] == "log"
    assert set(data["tools"]) == {find, cancel}
    assert data["tools"][cancel]["refs"] == {arg: "order_id"}
    assert "injected" not in data["tools"]
    # Not a control character left for a terminal or an editor to act on.
    assert "\x1b" not in text
    contract = tg.load_contract(out)
    assert contract.mode == "log"


_DEEP = "[" * 5000 + "]" * 5000  # deeper than the json module's stack: a RecursionError


def test_arguments_nested_past_the_parsers_stack_are_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = run("r0", "hi", ("tool", {}, {"ok": True}))
    row["messages"][1]["tool_calls"][0]["function"]["arguments"] = _DEEP
    out = tmp_path / "c.toml"
    assert main(["infer", write(str(tmp_path), [row]), "--out", str(out)]) == 0
    assert tomllib.loads(out.read_text()).get("tools", {}) == {}
    assert "Traceback" not in capsys.readouterr().err


def _span_line(*spans: Mapping[str, object]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def _call_span(span_id: str, attributes: Mapping[str, Mapping[str, object]]) -> dict[str, object]:
    base: dict[str, Mapping[str, object]] = {
        "gen_ai.operation.name": {"stringValue": "execute_tool"},
        "gen_ai.tool.name": {"stringValue": "tool"},
        "toolguard.trajectory.id": {"stringValue": "t1"},
        "toolguard.step": {"intValue": "1"},
        "toolguard.valid": {"boolValue": True},
        "toolguard.decision": {"stringValue": "allowed"},
        "gen_ai.tool.call.arguments": {"stringValue": '{"a": "value-1"}'},
        "gen_ai.tool.call.result": {"stringValue": '{"ok": true}'},
    }
    base.update(attributes)
    return {
        "traceId": "0" * 31 + "1",
        "spanId": span_id,
        "attributes": [{"key": k, "value": v} for k, v in base.items() if v],
    }


def test_deeply_nested_recorded_arguments_in_a_span_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spans.jsonl"
    deep = {"gen_ai.tool.call.arguments": {"stringValue": _DEEP}}
    path.write_text(_span_line(_call_span("a" * 16, deep)) + "\n")
    out = tmp_path / "c.toml"
    assert main(["infer", str(path), "--format", "spans", "--out", str(out)]) == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "step",
    [
        {"stringValue": "one"},
        {"doubleValue": 1.5},
        {"boolValue": True},
        {"intValue": "-3"},
        {"intValue": "0"},
        {"intValue": "9" * 5000},  # past int()'s digit limit
        {"intValue": [1]},
    ],
)
def test_a_call_span_whose_step_is_unreadable_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], step: dict[str, object]
) -> None:
    path = tmp_path / "spans.jsonl"
    good = _call_span("b" * 16, {"toolguard.step": {"intValue": "2"}})
    path.write_text(
        "\n" + _span_line(good) + "\n" + _span_line(_call_span("a" * 16, {"toolguard.step": step}))
    )
    out = tmp_path / "c.toml"
    assert main(["infer", str(path), "--format", "spans", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert (
        f"{path}: 1 call span(s) whose toolguard.step is not a whole number >= 1, not read "
        f"(the first at {path}:3, trajectory 't1')" in err
    )
    assert "Traceback" not in err


def test_call_spans_without_a_trajectory_id_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spans.jsonl"
    spans = [
        _call_span("a" * 16, {"toolguard.trajectory.id": {}}),
        _call_span("b" * 16, {"toolguard.trajectory.id": {"intValue": "7"}}),
    ]
    path.write_text(_span_line(*spans) + "\n")
    assert main(["infer", str(path), "--format", "spans", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert (
        f"{path}: 2 call span(s) with toolguard.step but no toolguard.trajectory.id string, "
        f"not read (the first at {path}:1)" in err
    )


def test_a_summary_whose_call_spans_are_all_lost_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spans.jsonl"
    summary: dict[str, object] = {
        "traceId": "0" * 31 + "1",
        "spanId": "c" * 16,
        "attributes": [
            {"key": "toolguard.trajectory.id", "value": {"stringValue": "t9"}},
            {"key": "toolguard.trajectory.length", "value": {"intValue": "3"}},
            {"key": "toolguard.trajectory.first_error_depth", "value": {"intValue": "4"}},
        ],
    }
    path.write_text(_span_line(summary) + "\n")
    assert main(["infer", str(path), "--format", "spans", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert (
        "1 trajector(y/ies) with a summary span of calls but no call span (the first: 't9')" in err
    )


@pytest.mark.parametrize(
    ("content", "hint"),
    [
        ('{"id": "r", "messages": []}', "; it looks like the openai format"),
        ('{"id": "multi_turn_base_0", "result": [["ls()"]]}', "; it looks like the bfcl format"),
        ('{\n  "info": {},\n  "simulations": []\n}', "; the file is one JSON document over"),
    ],
)
def test_a_span_source_of_another_format_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, hint: str
) -> None:
    path = tmp_path / "runs.json"
    path.write_text(content + "\n")
    assert main(["infer", str(path), "--format", "spans", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert f"{path}: not read as spans: {path}:1" in err and hint in err


def test_out_naming_a_source_is_refused_and_the_source_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write(str(tmp_path), [run("r0", "hi", ("tool", {"a": "value-1"}, {"ok": True}))])
    recorded = Path(src).read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(src)
    missing = str(tmp_path / "missing.jsonl")  # a source naming nothing hides no other
    assert main(["infer", missing, src, "--out", str(link)]) == 2
    err = capsys.readouterr().err
    assert f"--out {link} is the source {src}: writing the contract there would lose it" in err
    assert Path(src).read_bytes() == recorded


@pytest.mark.parametrize(
    ("raised", "status", "said"),
    [(KeyboardInterrupt, 130, "toolguard: interrupted"), (MemoryError, 2, "out of memory")],
)
def test_an_interrupt_or_no_memory_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    raised: type[BaseException],
    status: int,
    said: str,
) -> None:
    import toolguard.infer.cli as cli

    def stop(*args: object, **kwargs: object) -> None:
        raise raised

    monkeypatch.setattr(cli, "trace_runs", stop)
    src = write(str(tmp_path), [run("r0", "hi", ("tool", {"a": "value-1"}, {"ok": True}))])
    assert main(["infer", src, "--out", str(tmp_path / "c.toml")]) == status
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_one_span_id_holding_two_different_spans_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spans.jsonl"
    first = _call_span("a" * 16, {})
    again = _call_span("a" * 16, {})  # the same span exported twice: read once, not named
    other = _call_span("a" * 16, {"toolguard.step": {"intValue": "2"}})
    path.write_text(_span_line(first, again) + "\n" + _span_line(other) + "\n")
    assert main(["infer", str(path), "--format", "spans", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert (
        f"{path}: 1 span(s) under the trace and span id of an earlier, different span, not "
        f"read (the first at {path}:2, span id 'aaaaaaaaaaaaaaaa')" in err
    )


@pytest.mark.parametrize("format", ["openai", "spans"])
def test_the_limit_a_warning_names_is_an_option_of_infer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], format: str
) -> None:
    # The reader's warning says "raise it with --max-element-bytes": infer takes it.
    if format == "spans":
        path = tmp_path / "spans.jsonl"
        path.write_text(_span_line(_call_span("a" * 16, {})) + "\n")
        src = str(path)
    else:
        src = write(str(tmp_path), [run("r0", "hi", ("tool", {"a": "value-1"}, {"ok": True}))])
    out = str(tmp_path / "c.toml")
    argv = ["infer", src, "--format", format, "--out", out]
    assert main([*argv, "--max-element-bytes", "50"]) == 0
    err = capsys.readouterr().err
    assert "line longer than 50 bytes (the element limit; raise it with --max-element-bytes)" in err
    assert main([*argv, "--max-element-bytes", "100000", "--max-string-bytes", "100000"]) == 0
    assert "not read as" not in capsys.readouterr().err


def test_values_shown_are_cut(tmp_path: Path) -> None:
    big = "x" * 100_000
    rows = [
        run(
            f"r{i}",
            "cancel",
            ("find", {"q": f"query {i}"}, {"order_id": f"ORD-{i}-{big}"}),
            ("cancel", {"order_id": f"ORD-{i}-{big}", "reason": big}, {"ok": True}),
        )
        for i in range(6)
    ]
    out = tmp_path / "c.toml"
    assert main(["infer", write(str(tmp_path), rows), "--out", str(out), "--show-values"]) == 0
    text = out.read_text()
    assert "# values seen: 'ORD-0-xxx" in text and "..." in text
    assert max(map(len, text.splitlines())) < 1000
    tomllib.loads(text)


def test_run_ids_made_unique_stay_unique_past_recorded_ones() -> None:
    from toolguard.infer.cli import _unique
    from toolguard.replay.model import RecordedRun

    given = ["r0", "r0", "r0~2", "r0~2", "r0"]
    runs = [RecordedRun(i, [], "here") for i in given]
    ids = [r.id for r in _unique(runs, {})]
    assert len(set(ids)) == len(given), ids
