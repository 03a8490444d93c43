"""OpenAI chat logs (tau-bench's shape included): the report's figures computed by hand."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from chatlog import calls, say, tool, user, write_jsonl

import toolguard as tg
from toolguard.replay import ReplayInputError, read_runs

PHONE = "+1-555-0199"

# Six runs; each comment gives (T, FED) in the environment cohort and the outcome.
RUNS: list[Any] = [
    {  # 1. the paper's run, every turn reusing call id c1: (3, 1), success
        "id": "paper",
        "reward": 1.0,
        "messages": [
            {"role": "system", "content": "You manage contacts."},
            user(f"Please delete the contact with phone {PHONE}."),
            calls(("c1", "remove_contact", {"contact_id": PHONE})),
            tool("c1", {"error": f"no contact with id {PHONE}"}),
            calls(("c1", "search_contacts", {"phone": PHONE})),
            tool("c1", [{"id": "id_8923", "name": "Alice"}]),
            calls(("c1", "remove_contact", {"contact_id": "id_8923"})),
            tool("c1", {"removed": "id_8923"}),
            say("Done."),
        ],
    },
    {  # 2. three parallel calls answered out of order, the second refused: (3, 2), failure
        "id": "parallel",
        "reward": 0.0,
        "messages": [
            user("Weather in Paris and in Atlantis, and the time in Paris?"),
            calls(
                ("p1", "get_weather", {"city": "Paris"}),
                ("p2", "get_weather", {"city": "Atlantis"}),
                ("p3", "get_time", {"city": "Paris"}),
            ),
            tool("p3", "12:00"),
            tool("p1", {"temp": 20}),
            tool("p2", "Error: unknown city Atlantis"),
            say("Paris: 20 degrees at 12:00; Atlantis is unknown."),
        ],
    },
    {  # 3. one turn reusing an id twice, answered in order, then a recovery: (3, 2), success
        "id": "reused-in-turn",
        "outcome": "pass",
        "messages": [
            user("Look up a and b, then c."),
            calls(("x", "lookup", {"q": "a"}), ("x", "lookup", {"q": "b"})),
            tool("x", "found a"),
            tool("x", "Error: nothing for b"),
            calls(("x", "lookup", {"q": "c"})),
            tool("x", "found c"),
        ],
    },
    # 4. no tool call at all, a bare list of messages: (0, 1), outcome unknown
    [user("hello"), say("Hello! How can I help?")],
    {  # 5. the last call never answered (the log ends): (2, 3), success
        "id": "unanswered",
        "success": True,
        "messages": [
            user("Find x and book it."),
            calls(("c9", "search", {"q": "x"})),
            tool("c9", [{"id": "x1"}]),
            calls(("c10", "book", {"id": "x1"})),
        ],
    },
    {  # 6. arguments that are not JSON could not have run: (1, 1) schema, failure
        "id": "bad-args",
        "reward": 0,
        "messages": [
            user("Search."),
            calls(("b1", "search", "{not json")),
            tool("b1", "Error: could not parse the arguments"),
        ],
    },
]
# 7. malformed: an answer to a call id the turn before it did not emit.
MALFORMED = {
    "id": "malformed",
    "messages": [user("hi"), calls(("m1", "search", {})), tool("m2", "ok")],
}


def test_figures_of_a_chat_log_computed_by_hand(tmp_path: Path, replay: Any) -> None:
    log = write_jsonl(tmp_path / "runs.jsonl", RUNS)
    done = replay("openai", [log])
    assert done.figures() == {
        "paper": (3, 1),
        "parallel": (3, 2),
        "reused-in-turn": (3, 2),
        "runs#4": (0, 1),
        "unanswered": (2, 3),
        "bad-args": (1, 1),
    }
    assert done.stats.runs == 6 and done.stats.calls == 12 and done.stats.trajectories == 6
    causes = {tid: r.first_error_cause for tid, r in done.records.items()}
    assert causes == {
        "environment/paper": "state_consistency",
        "environment/parallel": "state_consistency",
        "environment/reused-in-turn": "state_consistency",
        "environment/runs#4": None,
        "environment/unanswered": None,
        "environment/bad-args": "schema",
    }
    g = done.group(replay="environment")
    # Executable: runs 4 and 5 (FED > T) of 6.
    assert g["n"] == 6 and g["ter"] == pytest.approx(2 / 6)
    assert g["mean_fed"] == pytest.approx((1 + 2 + 2 + 1 + 3 + 1) / 6)
    # AUC-PEC over T > 0: (FED - 1) / T = 0/3, 1/3, 1/3, 2/2, 0/1.
    assert g["auc_pec"] == pytest.approx((0 + 1 / 3 + 1 / 3 + 1 + 0) / 5)
    assert g["n_empty"] == 1
    # Y known for 5 runs (rewards 1, 0; "pass"; True; 0): 3 successes.
    assert g["final_success"] == pytest.approx(3 / 5)
    # RR: broken runs with a known outcome are 1, 2, 3, 6; runs 1 and 3 recovered.
    assert (g["rr_eligible"], g["rr"]) == (4, pytest.approx(2 / 4))
    assert g["causes"]["state_consistency"] == 3 and g["causes"]["schema"] == 1
    labels = done.records["environment/paper"].labels
    assert labels == {"replay": "environment", "run": "paper", "task": "paper"}


def test_joining_answers_by_id_alone_would_call_the_paper_run_executable(
    tmp_path: Path,
) -> None:
    # An id -> answer table over the whole run gives every c1 call the last answer, and the
    # rejected first call would look valid; answers are matched within their turn instead.
    messages = RUNS[0]["messages"]
    by_id = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert by_id == {"c1": json.dumps({"removed": "id_8923"})}
    (run,) = read_runs("openai", [write_jsonl(tmp_path / "one.jsonl", RUNS[:1])])
    assert [c.answer.error for c in run.calls() if c.answer is not None] == [True, False, False]


def test_a_malformed_run_names_file_and_line_or_is_skipped(tmp_path: Path, replay: Any) -> None:
    log = write_jsonl(tmp_path / "runs.jsonl", [*RUNS, MALFORMED])
    with pytest.raises(ReplayInputError) as err:
        replay("openai", [log])
    assert str(err.value).startswith(f"{log}:7 (run 7): message 2 answers call id 'm2'")
    assert not (tmp_path / "spans.jsonl").exists()  # no half span file left behind
    done = replay("openai", [log], skip_invalid=True)
    assert done.stats.skipped == 1 and str(log) + ":7" in (done.stats.first_skipped or "")
    assert len(done.figures()) == 6


@pytest.mark.parametrize(
    ("messages", "why"),
    [
        ([user("hi"), tool("c1", "ok")], "message 1 is a tool answer with no tool call"),
        (
            [calls(("c1", "f", {})), tool("c1", "a"), tool("c1", "b")],
            "message 2 is a second answer",
        ),
        ([{"role": "robot", "content": "x"}], "unknown role 'robot'"),
        ([{"role": "assistant", "tool_calls": [{"id": "c"}]}], "tool call 0 has no name"),
        ("not a list", "the messages are not a list"),
    ],
)
def test_what_makes_a_run_malformed(tmp_path: Path, messages: Any, why: str) -> None:
    log = write_jsonl(tmp_path / "bad.jsonl", [{"messages": messages}])
    with pytest.raises(ReplayInputError, match=why):
        list(read_runs("openai", [log]))


def test_tau_bench_shape_a_json_list_of_runs_streamed(tmp_path: Path, replay: Any) -> None:
    # tau-bench saves a JSON list (indent 2) of {task_id, reward, info, traj, trial}; its
    # tools answer "Error: ..." text. Two trials of one task, and one of another.
    def traj(ok: bool) -> list[Any]:
        return [
            {"role": "system", "content": "policy"},
            user("cancel reservation ZFA04Y"),
            calls(("call_a", "get_reservation_details", {"reservation_id": "ZFA04Y"})),
            tool("call_a", {"reservation_id": "ZFA04Y"} if ok else "Error: reservation not found"),
        ]

    runs = [
        {"task_id": 3, "trial": 0, "reward": 1.0, "info": {}, "traj": traj(True)},
        {"task_id": 3, "trial": 1, "reward": 0.0, "info": {}, "traj": traj(False)},
        {"task_id": 7, "trial": 0, "reward": 0.0, "info": {}, "traj": traj(True)},
    ]
    path = tmp_path / "tau-bench-results.json"
    path.write_text(json.dumps(runs, indent=2))
    done = replay("openai", [path], labels={"model": "gpt-x"})  # ids get the labels' prefix
    assert done.figures() == {
        "model=gpt-x/3/trial-0": (1, 2),
        "model=gpt-x/3/trial-1": (1, 1),
        "model=gpt-x/7/trial-0": (1, 2),
    }
    record = done.records["environment/model=gpt-x/3/trial-1"]
    assert record.success is False
    assert record.labels == {
        "model": "gpt-x",
        "replay": "environment",
        "run": "3/trial-1",
        "task": "3",
        "trial": "1",
    }


CONTRACT = """
mode = "block"

[tools.search_contacts]
produces = { id = "contact_id" }

[tools.search_contacts.json_schema]
type = "object"
properties = { phone = { type = "string" } }
required = ["phone"]

[tools.remove_contact]
refs = { contact_id = "contact_id" }

[tools.get_weather]
grounded = ["city"]
"""


def test_what_if_of_a_contract_on_old_runs(tmp_path: Path, replay: Any) -> None:
    contract = tmp_path / "contract.toml"
    contract.write_text(CONTRACT)
    ghost = {  # a blocked call's recorded answer is not read: its id is never produced
        "id": "ghost",
        "reward": 1.0,
        "messages": [
            user("remove Bob"),
            calls(("g1", "search_contacts", {"name": "Bob"})),
            tool("g1", [{"id": "id_7"}]),
            calls(("g2", "remove_contact", {"contact_id": "id_7"})),
            tool("g2", {"removed": "id_7"}),
        ],
    }
    ungrounded = {  # only Paris was mentioned; the environment answered both
        "id": "ungrounded",
        "reward": 0.0,
        "messages": [
            user("Weather in Paris?"),
            calls(
                ("w1", "get_weather", {"city": "Paris"}), ("w2", "get_weather", {"city": "Rome"})
            ),
            tool("w1", {"temp": 20}),
            tool("w2", {"temp": 25}),
        ],
    }
    log = write_jsonl(tmp_path / "runs.jsonl", [RUNS[0], ghost, ungrounded])
    done = replay("openai", [log], contract=contract)
    assert done.figures("environment") == {"paper": (3, 1), "ghost": (2, 3), "ungrounded": (2, 3)}
    assert done.figures("with_contract") == {"paper": (3, 1), "ghost": (2, 1), "ungrounded": (2, 2)}
    causes = {t: r.first_error_cause for t, r in done.records.items() if t.startswith("with_")}
    assert causes == {
        "with_contract/paper": "dependency",  # a phone number where an id belongs
        "with_contract/ghost": "schema",
        "with_contract/ungrounded": "information",
    }
    env, what_if = done.group(replay="environment"), done.group(replay="with_contract")
    assert (env["ter"], what_if["ter"]) == (pytest.approx(2 / 3), 0.0)
    comparison = tg.compare(
        list(done.records.values()),
        {"replay": "environment"},
        {"replay": "with_contract"},
        task_label="run",
    )
    assert comparison["n_paired"] == 3
    assert comparison["metrics"]["ter"]["diff"] == pytest.approx(-2 / 3)


def test_with_the_run_s_tool_list_a_call_of_another_tool_is_unknown(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from toolguard.replay import Replayer

    contract = tmp_path / "contract.toml"
    contract.write_text('mode = "log"\n')
    run = {
        "id": "offered",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "search",
                    "parameters": {
                        "type": "object",
                        "properties": {"q": {"type": "string"}},
                        "required": ["q"],
                    },
                },
            }
        ],
        "messages": [
            calls(("a", "search", {"q": "x"}), ("b", "search", {"q": 3}), ("c", "delete_all", {})),
            tool("a", "ok"),
            tool("b", "ok"),
            tool("c", "done"),
        ],
    }
    (recorded,) = read_runs("openai", [write_jsonl(tmp_path / "r.jsonl", [run])])
    replayer = Replayer(TracerProvider(), contract=tg.load_contract(contract))
    env = replayer.replay(recorded, "environment")
    what_if = replayer.replay(recorded, "with_contract")
    assert (env.length, env.first_error_depth) == (3, 4)
    checks = [(v.step, v.check, v.decision) for v in sorted(what_if.verdicts, key=_step)]
    assert checks == [
        (1, None, "allowed"),
        (2, "schema.args", "logged"),  # the run's own schema: q must be a string
        (3, "schema.tool", "blocked"),  # not offered: cannot run in either mode
    ]


def _step(v: tg.Verdict) -> int:
    return v.step or 0


def _random_run(rng: random.Random, index: int) -> tuple[dict[str, Any], int, int]:
    """A run with parallel turns, reused ids, answers out of order, several error encodings,
    unanswered calls and unparseable arguments; and its (T, FED) computed directly from the
    recorded answers."""
    messages: list[Any] = [user(f"task {index}")]
    length, fed = 0, None
    for _turn in range(rng.randint(0, 4)):
        n = rng.randint(1, 3)
        ids = [rng.choice(["c1", "c2", f"t{_turn}_{k}"]) for k in range(n)]
        items = []
        bad_args = [rng.random() < 0.08 for _ in range(n)]
        for k in range(n):
            args: Any = "{oops" if bad_args[k] else {"k": k}
            items.append((ids[k], rng.choice(["a", "b"]), args))
        messages.append(calls(*items))
        # Within a turn that repeats an id, answers pair by position: a missing answer would
        # shift them (the hand-made runs pin that down), so such a turn answers every call.
        repeats = len(set(ids)) < n
        answered = [repeats or rng.random() > 0.1 for _ in range(n)]
        errors = [rng.random() < 0.2 for _ in range(n)]
        encodings = ["object", "prefix", "flag"]
        order = list(range(n))
        if not repeats:  # with distinct ids the answers may come in any order
            rng.shuffle(order)
        for k in order:
            if not answered[k]:
                continue
            message = tool(ids[k], "fine")
            if errors[k]:
                kind = rng.choice(encodings)
                if kind == "object":
                    message = tool(ids[k], {"error": "refused"})
                elif kind == "prefix":
                    message = tool(ids[k], "Error: refused")
                else:
                    message = {**tool(ids[k], "refused"), "is_error": True}
            messages.append(message)
        for k in range(n):
            length += 1
            # Invalid: arguments that do not parse, or an answer that says it failed.
            if fed is None and (bad_args[k] or (answered[k] and errors[k])):
                fed = length
        if rng.random() < 0.5:
            messages.append(say("ok"))
    run = {"id": f"r{index}", "reward": float(rng.random() < 0.5), "messages": messages}
    return run, length, fed if fed is not None else length + 1


def test_replay_through_the_guard_agrees_with_the_recorded_errors(
    tmp_path: Path, replay: Any
) -> None:
    rng = random.Random(14)
    runs, expected = [], {}
    for index in range(300):
        run, length, fed = _random_run(rng, index)
        runs.append(run)
        expected[run["id"]] = (length, fed)
    contract = tmp_path / "empty.toml"
    contract.write_text('mode = "block"\n')  # permissive: must agree with the environment
    done = replay("openai", [write_jsonl(tmp_path / "random.jsonl", runs)], contract=contract)
    assert done.figures("environment") == expected
    assert done.figures("with_contract") == expected
    assert any(t == 0 for t, _ in expected.values()) and any(f <= t for t, f in expected.values())
