"""`toolguard infer` on hostile recordings: names that try to leave their comment, span files
with attributes of the wrong type, arguments nested deeper than any parser's stack. Always a
contract that parses (or an empty one with a warning), exit status 0, never a traceback."""

from __future__ import annotations

import json
import tomllib
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
    find, cancel, arg = f"find{_BREAK_OUT}", f"cancel{_BREAK_OUT}", f"order_id{_ARG_BREAK_OUT}\x1b"
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
