"""JSON ``null`` for an optional argument with a default is "the default" in the BFCL and
tau2 contract replays (their backends take it), and a contract option elsewhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import toolguard as tg
from toolguard.replay import bfcl_env

needs_bfcl = pytest.mark.skipif(
    not bfcl_env.available(), reason="bfcl-eval not installed (make test installs it)"
)


def fc_file(tmp_path: Path, arguments: dict[str, Any]) -> Path:
    """multi_turn_base_0 from a function-calling model: one find() call in its first turn."""
    path = tmp_path / "fc-model" / "multi_turn" / "BFCL_v4_multi_turn_base_result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result = [[[{"find": json.dumps(arguments)}]], [], [], []]
    path.write_text(json.dumps({"id": "multi_turn_base_0", "result": result}) + "\n")
    return path


def contract(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text('mode = "log"\n' + text)
    return path


@needs_bfcl
def test_null_for_a_defaulted_bfcl_argument_is_no_schema_error(tmp_path: Path, replay: Any) -> None:
    # find(path=".", name=None): BFCL's doc gives `name` a default; the backend lists all.
    path = fc_file(tmp_path, {"path": ".", "name": None})
    done = replay("bfcl", [path], contract=contract(tmp_path, ""))
    assert done.figures("environment") == {"fc-model/multi_turn_base_0": (1, 2)}
    assert done.figures("with_contract") == {"fc-model/multi_turn_base_0": (1, 2)}
    # Said off in the contract file (for the tool, or for every tool): the flag is back.
    for text in ("null_as_default = false\n", "[tools.find]\nnull_as_default = false\n"):
        (tmp_path / "spans.jsonl").unlink()
        off = replay("bfcl", [path], contract=contract(tmp_path, text))
        record = off.records["with_contract/fc-model/multi_turn_base_0"]
        assert (record.fed, record.first_error_cause) == (1, "schema")
    # The type still counts: a number for `name` is a schema error, null or not.
    wrong = fc_file(tmp_path / "w", {"path": ".", "name": 3})
    (tmp_path / "spans.jsonl").unlink()
    bad = replay("bfcl", [wrong], contract=contract(tmp_path, ""))
    assert bad.records["with_contract/fc-model/multi_turn_base_0"].first_error_cause == "schema"


def test_the_contract_option_per_file_and_per_tool(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["open", "closed"], "default": "open"},
            "owner": {"type": "string"},  # no default: null stays an error
            "limit": {"type": "integer", "default": 5},
        },
        "required": ["limit"],  # required: null stays an error even with a default
        "additionalProperties": False,
    }
    text = 'mode = "block"\nnull_as_default = true\n[tools.quiet]\nnull_as_default = false\n'
    loaded = tg.load_contract(contract(tmp_path, text.replace('mode = "block"\n', "")))

    def verdicts(tool: str) -> list[bool]:
        guard = tg.Guard(mode="block")
        guard.declare(tool, loaded.spec_for(tool, schema))
        out = []
        for args in ({"status": None, "limit": 1}, {"owner": None, "limit": 1}, {"limit": None}):
            with guard.trajectory("t") as traj:
                pending = guard.check(tool, args, trajectory=traj)
                out.append(pending.rejection is None)
                if pending.rejection is None:
                    pending.cancel()
        return out

    assert verdicts("tickets") == [True, False, False]
    assert verdicts("quiet") == [False, False, False]
    # Unset in the file: the caller's default decides (the replay's: on for bfcl and tau2).
    plain = tg.load_contract(contract(tmp_path, ""))
    assert plain.null_as_default is None
    nullable = plain.spec_for("t", schema, null_as_default=True).json_schema
    assert nullable is not None and "anyOf" in nullable["properties"]["status"]
    assert plain.spec_for("t", schema).json_schema == schema
    with pytest.raises(tg.ContractFileError, match="null_as_default must be true or false"):
        tg.load_contract(contract(tmp_path, 'null_as_default = "yes"\n'))
