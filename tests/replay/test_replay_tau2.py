"""tau2 simulation files: the report's figures by hand, and a file made by tau2 itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chatlog import write_jsonl

from toolguard.replay import ReplayInputError

USER_DEFS = {
    "name": "get_user_details",
    "doc": "Get the details of a user.",
    "params": {
        "type": "object",
        "properties": {"user_id": {"type": "string"}},
        "required": ["user_id"],
    },
}
RESERVATION_DEFS = {
    "name": "get_reservation_details",
    "doc": "Get the details of a reservation.",
    "params": {
        "type": "object",
        "properties": {"reservation_id": {"type": "string"}},
        "required": ["reservation_id"],
    },
}


def call(cid: str, name: str, args: dict[str, Any], requestor: str = "assistant") -> Any:
    return {"id": cid, "name": name, "arguments": args, "requestor": requestor}


def answer(cid: str, content: Any, error: bool = False, requestor: str = "assistant") -> Any:
    text = content if isinstance(content, str) else json.dumps(content)
    return {"id": cid, "role": "tool", "content": text, "requestor": requestor, "error": error}


def said(role: str, text: str | None, *tool_calls: Any) -> Any:
    return {"role": role, "content": text, "tool_calls": list(tool_calls) or None, "turn_idx": 0}


def simulation(sid: str, task: str, reward: float | None, messages: list[Any]) -> Any:
    return {
        "id": sid,
        "task_id": task,
        "trial": 0,
        "start_time": "2026-01-01T00:00:00",
        "end_time": "2026-01-01T00:01:00",
        "duration": 60.0,
        "termination_reason": "user_stop",
        "reward_info": None if reward is None else {"reward": reward, "reward_basis": ["DB"]},
        "messages": messages,
    }


SIMULATIONS = [
    # (3, 2): the second call refused by the environment; then a recovery; reward 1.
    simulation(
        "sim-1",
        "0",
        1.0,
        [
            said("assistant", "Hi! How can I help you?"),
            said("user", "I am mia_li_3668, what about my reservation?"),
            said("assistant", None, call("call_1", "get_user_details", {"user_id": "mia_li_3668"})),
            answer("call_1", {"user_id": "mia_li_3668", "reservations": ["NO6JO3", "AIXC49"]}),
            said(
                "assistant",
                None,
                call("call_2", "get_reservation_details", {"reservation_id": "ZZZ"}),
            ),
            answer("call_2", "Error: Reservation ZZZ not found", error=True),
            said(
                "assistant",
                None,
                call("call_3", "get_reservation_details", {"reservation_id": "NO6JO3"}),
            ),
            answer("call_3", {"reservation_id": "NO6JO3"}),
        ],
    ),
    # (2, 3): the simulated user's own tool call (and its refusal) is not the agent's; two
    # parallel calls with tau2's default empty id, answered by position; reward 0.
    simulation(
        "sim-2",
        "1",
        0.0,
        [
            said("user", "my phone is off", call("u1", "toggle_airplane_mode", {}, "user")),
            answer("u1", "Error: no such device", error=True, requestor="user"),
            said(
                "assistant",
                None,
                call("", "get_user_details", {"user_id": "a"}),
                call("", "get_user_details", {"user_id": "b"}),
            ),
            answer("", {"user_id": "a"}),
            answer("", {"user_id": "b"}),
        ],
    ),
    # (0, 1): no tool call, no reward recorded.
    simulation("sim-3", "2", None, [said("user", "bye"), said("assistant", "Bye!")]),
]


def results_file(path: Path, simulations: list[Any]) -> Path:
    """A tau2 results document: info, tasks (not read), simulations (streamed)."""
    results = {
        "timestamp": "2026-01-01T00:00:00",
        "info": {
            "git_commit": "abc",
            "num_trials": 1,
            "max_steps": 100,
            "max_errors": 10,
            "user_info": {"implementation": "user_simulator", "llm": "gpt-4.1"},
            "agent_info": {"implementation": "llm_agent", "llm": "gpt-4.1-mini"},
            "environment_info": {
                "domain_name": "airline",
                "policy": "...",
                "tool_defs": {
                    "get_user_details": USER_DEFS,
                    "get_reservation_details": RESERVATION_DEFS,
                },
            },
        },
        "tasks": [{"id": str(i), "description": {"purpose": "x" * 100}} for i in range(50)],
        "simulations": simulations,
    }
    path.write_text(json.dumps(results, indent=4))
    return path


def test_figures_of_a_tau2_results_file_computed_by_hand(tmp_path: Path, replay: Any) -> None:
    done = replay("tau2", [results_file(tmp_path / "results.json", SIMULATIONS)])
    assert done.figures() == {"sim-1": (3, 2), "sim-2": (2, 3), "sim-3": (0, 1)}
    g = done.group(replay="environment")
    assert g["ter"] == pytest.approx(2 / 3)  # sim-2 and sim-3
    assert g["auc_pec"] == pytest.approx(((2 - 1) / 3 + (3 - 1) / 2) / 2)  # T > 0 only
    assert g["mean_fed"] == pytest.approx((2 + 3 + 1) / 3)
    assert g["final_success"] == pytest.approx(1 / 2)  # sim-3 has no reward
    assert (g["rr_eligible"], g["rr"]) == (1, 1.0)  # sim-1 broke and was rewarded
    assert done.records["environment/sim-1"].labels == {
        "domain": "airline",
        "model": "gpt-4.1-mini",
        "replay": "environment",
        "run": "sim-1",
        "task": "0",
        "trial": "0",
    }


CONTRACT = """
mode = "block"

[tools.get_user_details]
produces = { "regex:\\"([A-Z0-9]{6})\\"" = "reservation_id" }

[tools.get_reservation_details]
refs = { reservation_id = "reservation_id" }
"""


def test_what_if_on_tau2_simulations_uses_the_tool_defs(tmp_path: Path, replay: Any) -> None:
    contract = tmp_path / "airline.toml"
    contract.write_text(CONTRACT)
    sims = [
        *SIMULATIONS,
        simulation(  # a tool the environment does not offer, and it answered with an error
            "sim-4",
            "3",
            0.0,
            [
                said("user", "upgrade me"),
                said("assistant", None, call("c", "upgrade_everyone", {})),
                answer("c", "Error: Tool 'upgrade_everyone' not found.", error=True),
            ],
        ),
    ]
    done = replay("tau2", [results_file(tmp_path / "r.json", sims)], contract=contract)
    assert done.figures("with_contract") == {
        "sim-1": (3, 2),
        "sim-2": (2, 3),
        "sim-3": (0, 1),
        "sim-4": (1, 1),
    }
    causes = {t: r.first_error_cause for t, r in done.records.items() if r.fed <= r.length}
    assert causes == {
        "environment/sim-1": "state_consistency",
        "with_contract/sim-1": "dependency",  # ZZZ was never produced: blocked before it ran
        "environment/sim-4": "state_consistency",
        "with_contract/sim-4": "schema",  # not among the tool_defs
    }


def test_simulations_as_a_list_or_json_lines_and_a_malformed_one(
    tmp_path: Path, replay: Any
) -> None:
    listed = tmp_path / "sims.json"
    listed.write_text(json.dumps(SIMULATIONS, indent=1))
    lines = write_jsonl(tmp_path / "sims.jsonl", SIMULATIONS)
    done = replay("tau2", [listed, lines])
    assert done.figures() == {
        "sim-1": (3, 2),
        "sim-2": (2, 3),
        "sim-3": (0, 1),
        "sim-1~2": (3, 2),
        "sim-2~2": (2, 3),
        "sim-3~2": (0, 1),
    }
    bad = results_file(tmp_path / "bad.json", [SIMULATIONS[0], {"id": "x", "messages": "oops"}])
    with pytest.raises(ReplayInputError, match=r"bad\.json:\d+ \(run 2\): .*'messages'"):
        replay("tau2", [bad])
    assert replay("tau2", [bad], skip_invalid=True).stats.skipped == 1


def test_a_file_written_by_tau2_itself(tmp_path: Path, replay: Any) -> None:
    """Messages and tool answers made by tau2's own airline environment and data model."""
    gate = pytest.importorskip("benchmarks.tau2._tau2")
    if (why := gate.tau2_import_error()) is not None:
        pytest.skip(why)
    from tau2.data_model.message import AssistantMessage, UserMessage

    env = gate.fresh_environment("airline")
    first = gate.tool_call("get_user_details", {"user_id": "mia_li_3668"}, "call_1")
    second = gate.tool_call("get_reservation_details", {"reservation_id": "NOPE00"}, "call_2")
    messages = [
        UserMessage(role="user", content="I am mia_li_3668"),
        AssistantMessage(role="assistant", tool_calls=[first, second]),
        env.get_response(first),
        env.get_response(second),
    ]
    dumped = [m.model_dump(mode="json") for m in messages]
    assert dumped[3]["error"] is True and dumped[2]["error"] is False
    sim = simulation("real", "0", 0.0, dumped)
    path = tmp_path / "tau2.json"
    info = env.get_info(include_tool_info=True).model_dump(mode="json")
    path.write_text(
        json.dumps({"info": {"environment_info": info}, "tasks": [], "simulations": [sim]})
    )
    done = replay("tau2", [path])
    assert done.figures() == {"real": (2, 2)}
    assert done.records["environment/real"].labels["domain"] == "airline"


def test_a_tau2_file_without_the_error_flag_reads_the_answer_text(
    tmp_path: Path, replay: Any
) -> None:
    """Files of tau2 versions whose tool messages carry no ``error`` flag: the answer's own
    ``Error:`` text (what tau2's environment writes for a raised tool) decides, as documented."""
    gate = pytest.importorskip("benchmarks.tau2._tau2")
    if (why := gate.tau2_import_error()) is not None:
        pytest.skip(why)
    from tau2.data_model.message import AssistantMessage, UserMessage

    env = gate.fresh_environment("airline")
    first = gate.tool_call("get_user_details", {"user_id": "mia_li_3668"}, "call_1")
    second = gate.tool_call("get_reservation_details", {"reservation_id": "NOPE00"}, "call_2")
    messages = [
        UserMessage(role="user", content="I am mia_li_3668"),
        AssistantMessage(role="assistant", tool_calls=[first, second]),
        env.get_response(first),
        env.get_response(second),
    ]
    dumped = [m.model_dump(mode="json") for m in messages]
    assert dumped[3]["content"].startswith("Error:")
    for message in dumped:
        message.pop("error", None)
    path = write_jsonl(tmp_path / "sims.jsonl", [simulation("noflag", "0", 0.0, dumped)])
    assert replay("tau2", [path]).figures() == {"noflag": (2, 2)}
    # An {"error": ...} object answers the same way; a flag, where present, wins over text.
    dumped[3]["content"] = json.dumps({"error": "Reservation NOPE00 not found"})
    path = write_jsonl(tmp_path / "sims2.jsonl", [simulation("obj", "0", 0.0, dumped)])
    assert replay("tau2", [path]).figures() == {"obj": (2, 2)}
    dumped[3]["error"] = False
    path = write_jsonl(tmp_path / "sims3.jsonl", [simulation("flag", "0", 0.0, dumped)])
    assert replay("tau2", [path]).figures() == {"flag": (2, 3)}
