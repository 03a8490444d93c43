"""Declarative contract files: what they declare, and errors that name file, tool and key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pydantic
import pytest

import toolguard as tg

sys.path.insert(0, str(Path(__file__).parent))

GIT_LOG = """Commit history:
Commit: '3f2a9c1d4e5b6a7980123456789abcdef0123456'
Author: A <a@example.com>
Message: first

Commit: 'b7e4d2c1a0f9e8d7c6b5a4938271605f4e3d2c1b'
Author: B <b@example.com>
Message: second
"""

CONTRACT = """
mode = "block"

[tools.git_log]
produces = { "regex:Commit: '([0-9a-f]{40})'" = "commit" }

[tools.git_show]
refs = { revision = "commit" }

[tools.send]
grounded = ["to"]
mode = "log"
preconditions = [
  { id = "short", predicate = "contract_rules:short_message", message = "at most 20 chars" },
]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "contract.toml"
    path.write_text(text)
    return path


def test_a_contract_file_declares_what_the_decorator_would(otel, tmp_path: Path) -> None:
    contract = tg.load_contract(write(tmp_path, CONTRACT))
    guard = otel.guard(mode=contract.mode)
    server_tools = {
        "git_log": {"type": "object", "properties": {"repo_path": {"type": "string"}}},
        "git_show": {"type": "object", "properties": {"revision": {"type": "string"}}},
        "send": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
        },
        "git_status": {"type": "object"},
    }
    assert contract.unknown_tools(server_tools) == []
    for name, schema in server_tools.items():
        guard.declare(name, contract.spec_for(name, schema))
    with guard.trajectory("git", user_input="send it to ana") as traj:
        guard.check("git_log", {"repo_path": "."}).finish(GIT_LOG)
        ok = guard.check("git_show", {"revision": "b7e4d2c1a0f9e8d7c6b5a4938271605f4e3d2c1b"})
        assert ok.rejection is None
        ok.finish("diff ...")
        invented = guard.check("git_show", {"revision": "deadbeef" * 5})
        assert invented.rejection is not None and invented.rejection.cause == "dependency"
        logged = guard.check("send", {"to": "bob", "text": "x" * 30})
        assert logged.rejection is None  # the tool's mode is log: it runs, recorded as logged
        logged.finish("sent")
    assert sorted(traj.live_values("commit")) == sorted(
        ["3f2a9c1d4e5b6a7980123456789abcdef0123456", "b7e4d2c1a0f9e8d7c6b5a4938271605f4e3d2c1b"]
    )
    last = traj.verdicts[-1]
    assert last.decision == "logged"
    assert last.failed_checks == ("precondition.short", "information.to")


def test_contract_names_a_tool_the_server_does_not_offer(tmp_path: Path) -> None:
    contract = tg.load_contract(write(tmp_path, CONTRACT))
    assert contract.unknown_tools(["git_log", "send"]) == ["git_show"]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("mode = 'warn'", ["contract.toml", "mode", "warn"]),
        ("colour = 1", ["contract.toml", "colour"]),
        ("[tools.t]\nrefs = ['x']", ["contract.toml", "'t'", "'refs'"]),
        ("[tools.t]\nrequires = { x = 'y' }", ["'t'", "'requires'", "unknown key"]),
        ("[tools.t]\nproduces = { 'regex:(' = 'k' }", ["'t'", "'produces'", "regular expression"]),
        ("[tools.t]\ngrounded = 'x'", ["'t'", "'grounded'"]),
        ("[tools.t]\nmode = 'strict'", ["'t'", "'mode'"]),
        ("[tools.t]\npreconditions = [{ id = 'p' }]", ["'t'", "'preconditions'", "'p'"]),
        ("[tools.t]\npreconditions = [{ id = 'p', predicate = 'nosuchmod:f' }]",
         ["'t'", "cannot import", "nosuchmod"]),
        ("[tools.t]\npreconditions = [{ id = 'p', predicate = 'contract_rules:NOT_CALLABLE' }]",
         ["'t'", "not callable"]),
        ("[tools.t\n", ["contract.toml", "not valid TOML"]),
        ("[tools.t]\npreconditions = [{ id = 'p', predicate = ':f' }]",
         ["'t'", "'p'", "absolute module name", "':f'"]),
        ("[tools.t]\npreconditions = [{ id = 'p', predicate = '.contract_rules:f' }]",
         ["'t'", "'p'", "absolute module name"]),
        ("[tools.t]\npreconditions = [{ id = 'p', predicate = 'contract_rules:' }]",
         ["'t'", "'p'", "absolute module name"]),
    ],
)  # fmt: skip
def test_a_malformed_contract_file_names_file_tool_and_key(
    tmp_path: Path, text: str, names: list[str]
) -> None:
    with pytest.raises(tg.ContractFileError) as info:
        tg.load_contract(write(tmp_path, text))
    for name in names:
        assert name in str(info.value)


def test_an_unreadable_contract_file_is_a_clear_error(tmp_path: Path) -> None:
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[tools.t]\ngrounded = ["caf\xe9"]\n')
    with pytest.raises(tg.ContractFileError, match=r"latin.toml: not UTF-8 text \(byte 26"):
        tg.load_contract(latin)
    with pytest.raises(tg.ContractFileError, match="is a folder, not a contract file"):
        tg.load_contract(tmp_path)


def test_a_predicate_module_that_fails_to_import_names_tool_and_condition(
    tmp_path: Path,
) -> None:
    (tmp_path / "broken_rules_syntax.py").write_text("def ok(:\n")
    (tmp_path / "broken_rules_raises.py").write_text("raise RuntimeError('no database')\n")
    for module, error in (
        ("broken_rules_syntax", "SyntaxError"),
        ("broken_rules_raises", "no database"),
    ):
        text = f"[tools.t]\npreconditions = [{{ id = 'p', predicate = '{module}:ok' }}]"
        with pytest.raises(tg.ContractFileError) as info:
            tg.load_contract(write(tmp_path, text))
        for name in ("contract.toml", "'t'", "'p'", f"importing '{module}:ok' failed", error):
            assert name in str(info.value)


def test_a_missing_contract_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(tg.ContractFileError, match="no such contract file"):
        tg.load_contract(tmp_path / "absent.toml")


def test_predicates_may_live_beside_the_contract_file(otel, tmp_path: Path) -> None:
    (tmp_path / "beside_rules.py").write_text("def never(x):\n    return False\n")
    contract = tg.load_contract(
        write(
            tmp_path,
            """
[tools.t]
strict = false
preconditions = [{ id = "never", predicate = "beside_rules:never" }]
""",
        )
    )
    guard = otel.guard()
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    guard.declare("t", contract.spec_for("t", schema))
    assert guard.get_tool("t").spec.strict is False
    # Not strict: the schema as written, which lets an undeclared argument through.
    rejection = guard.check("t", {"x": 3, "extra": 1}).rejection
    assert rejection is not None and rejection.check == "precondition.never"


def test_a_code_contract_keeps_every_option_it_gives(otel) -> None:
    """A contract made in code (the MCP adapter's options per tool) may give any option of
    ToolSpec: spec_for keeps them all, the schema settled from the server's where the
    contract gives none; an args_model is kept without a schema."""

    def failed(result: Any) -> bool:
        return result.get("status") == "failed"

    class Args(pydantic.BaseModel):
        x: int

    contract = tg.Contract(
        "<code>",
        tools={
            "t": tg.ToolSpec(error_result=failed, external_effects=True, refs={"x": "k"}),
            "m": tg.ToolSpec(args_model=Args),
        },
    )
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    spec = contract.spec_for("t", schema)
    assert (spec.error_result, spec.external_effects, spec.refs) == (failed, True, {"x": "k"})
    assert spec.json_schema == schema and spec.name == "t"
    model_spec = contract.spec_for("m", schema)
    assert model_spec.args_model is Args and model_spec.json_schema is None
    guard = otel.guard()
    guard.declare("t", contract.spec_for("t", schema))
    with otel.trajectory("own-error-result") as traj:
        traj.bind("k", 1)
        pending = guard.check("t", {"x": 1})
        assert pending.rejection is None
        assert pending.finish({"status": "failed"}).cause == "state_consistency"  # its own rule
    # a declaration the contract cannot have (a dry run for a tool its owner runs) is refused
    dry = tg.Contract("<code>", tools={"d": tg.ToolSpec(dry_run=True)})
    with pytest.raises(tg.ToolDefinitionError, match="dry run"):
        guard.declare("d", dry.spec_for("d", schema))
