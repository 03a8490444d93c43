"""ToolSandbox run directories (apple/ToolSandbox's ``conversation.json`` and
``result_summary.json``, written here in its documented shape): the protocol's worked
example, the contract what-if, and malformed input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolguard.replay import ReplayInputError, read_runs
from toolguard.replay.toolsandbox import error_of

RUN_DIR = "agent_gpt-4o-2024-05-13_user_gpt-4o-2024-05-13_07_03_2024_00_17_44"
SYSTEM = {"role": "system", "content": "Don't make assumptions about what values to plug in."}
USER = {"role": "user", "content": "Remove the contact with phone +1-555-0199."}


def call(cid: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An agent turn as serialize_to_conversation writes it (content "", one tool call)."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function",
                                                               "function": function}]}  # fmt: skip


def answer(cid: str, name: str, content: str) -> dict[str, Any]:
    return {"tool_call_id": cid, "role": "tool", "name": name, "content": content}


MISSING = "NoDataError: No db entries matched the predicate: person_id == '+1-555-0199'"
FOUND = "[{'person_id': 'id_8923', 'name': 'Homer', 'phone_number': '+1-555-0199'}]"
# Trajectory A of docs/protocol.md: the removal rejected, then search, then the removal.
A = [
    SYSTEM,
    USER,
    call("call_1", "remove_contact", {"person_id": "+1-555-0199"}),
    answer("call_1", "remove_contact", MISSING),
    call("call_2", "search_contacts", {"phone_number": "+1-555-0199"}),
    {**answer("call_2", "search_contacts", FOUND), "tool_details": {"database_update": {}}},
    call("call_3", "remove_contact", {"person_id": "id_8923"}),
    answer("call_3", "remove_contact", "None"),
    {"role": "assistant", "content": "Removed."},
]
# Trajectory B: search, then remove.
B = [SYSTEM, USER, *A[4:]]


def run_directory(root: Path, scenarios: dict[str, list[Any]], similarity: float = 1.0) -> Path:
    run = root / RUN_DIR
    for name, messages in scenarios.items():
        folder = run / "trajectories" / name
        folder.mkdir(parents=True)
        (folder / "conversation.json").write_text(json.dumps(messages, indent=2))
    rows = [
        {"name": n, "categories": ["STATE_DEPENDENCY"], "traceback": None, "exception_type": None,
         "milestone_similarity": similarity, "minefield_similarity": 0.0,
         "similarity": similarity, "turn_count": 8, "milestone_mapping": {},
         "minefield_mapping": {}}
        for n in scenarios
    ]  # fmt: skip
    summary = {"per_scenario_results": rows, "category_aggregated_results": {}, "git_sha": None}
    (run / "result_summary.json").write_text(json.dumps(summary, indent=4))
    return run


def test_the_protocol_s_worked_example_from_toolsandbox_files(tmp_path: Path, replay: Any) -> None:
    run = run_directory(tmp_path, {"remove_contact_a": A, "remove_contact_b": B})
    done = replay("toolsandbox", [run])
    assert done.figures() == {
        f"{RUN_DIR}/remove_contact_a": (3, 1),
        f"{RUN_DIR}/remove_contact_b": (2, 3),
    }
    g = done.group(replay="environment")
    assert (g["ter"], g["mean_fed"], g["auc_pec"]) == (0.5, 2.0, 0.5)
    assert (g["rr"], g["rr_eligible"], g["s"], g["final_success"]) == (1.0, 1, 1.0, 1.0)
    assert g["pec"] == [0.5, 0.5, 0.0]
    record = done.records[f"environment/{RUN_DIR}/remove_contact_a"]
    assert record.first_error_cause == "state_consistency"
    assert record.labels["model"] == "gpt-4o-2024-05-13"
    assert record.labels["scenario"] == "remove_contact_a"
    # One conversation.json alone: its run directory's summary still gives Y.
    (tmp_path / "spans.jsonl").unlink()
    one = run / "trajectories" / "remove_contact_b" / "conversation.json"
    alone = replay("toolsandbox", [one])
    assert alone.records[f"environment/{RUN_DIR}/remove_contact_b"].success is True


def test_the_contract_what_if_on_toolsandbox(tmp_path: Path, replay: Any) -> None:
    run = run_directory(tmp_path, {"remove_contact_a": A}, similarity=0.5)
    contract = tmp_path / "c.toml"
    contract.write_text(
        'mode = "block"\n[tools.remove_contact]\nrefs = { person_id = "person_id" }\n'
        '[tools.search_contacts]\nproduces = { person_id = "person_id" }\n'
    )
    done = replay("toolsandbox", [run], contract=contract)
    record = done.records[f"with_contract/{RUN_DIR}/remove_contact_a"]
    # The phone number was never a person id: a dependency error, caught before it ran.
    assert (record.fed, record.first_error_cause) == (1, "dependency")
    assert record.success is False  # similarity 0.5: not every milestone matched


def test_exception_lines_are_the_environment_s_rejections() -> None:
    def verdict(text: str) -> bool:
        return error_of({"content": text}, text)

    assert verdict(MISSING) and verdict("printed first\nTypeError: bad operand")
    assert verdict("Error: The given code was incomplete and could not be executed: 'x('")
    assert verdict("tool_sandbox.common.execution_context.NoDataError: none")
    assert verdict('  File "<input>", line 1\nSyntaxError: invalid syntax')
    for fine in ("None", FOUND, "'ValueError: a string'", "ValueError('kept as a value')", ""):
        assert not verdict(fine), fine


def test_malformed_toolsandbox_input(tmp_path: Path, replay: Any) -> None:
    with pytest.raises(ReplayInputError, match="no ToolSandbox trajectory"):
        list(read_runs("toolsandbox", [tmp_path]))
    run = run_directory(tmp_path, {"ok": B, "bad": A})
    (run / "trajectories" / "bad" / "conversation.json").write_text('{"messages": 3}')
    with pytest.raises(ReplayInputError, match=r"bad/conversation\.json: a ToolSandbox "):
        list(read_runs("toolsandbox", [run]))
    done = replay("toolsandbox", [run], skip_invalid=True)
    assert done.stats.skipped == 1 and list(done.figures()) == [f"{RUN_DIR}/ok"]
    (run / "result_summary.json").write_text('{"per_scenario_results": [{"name": "ok"}]}')
    with pytest.raises(ReplayInputError, match="'ok' has no numeric similarity"):
        list(read_runs("toolsandbox", [run]))
