"""A call paused for a human's approval in a trajectory the adapter opened itself: that
trajectory ends with its block, so the call ends there, ``cancelled`` (``blocked`` where its
checks refuse it), and T counts no step without a verdict. A run resuming the state in a new
trajectory counts the call there again."""

from __future__ import annotations

from typing import Any

from agents import Runner
from oa_contacts import address_book, approval_agent
from oa_support import NO_SDK_TRACING, Telemetry

from toolguard_openai_agents import guarded_run, run_sync


def calls_by_trajectory(otel: Telemetry) -> dict[str, list[tuple[Any, Any, Any]]]:
    calls: dict[str, list[tuple[Any, Any, Any]]] = {}
    for span in otel.call_spans():
        a = span.attributes or {}
        calls.setdefault(str(a["toolguard.trajectory.id"]), []).append(
            (a["gen_ai.tool.call.id"], a["toolguard.step"], a["toolguard.decision"])
        )
    return {k: sorted(v) for k, v in calls.items()}


def lengths(otel: Telemetry) -> dict[Any, Any]:
    return {
        (s.attributes or {})["toolguard.trajectory.id"]: (s.attributes or {})[
            "toolguard.trajectory.length"
        ]
        for s in otel.spans()
        if s.name == "toolguard.trajectory"
    }


def test_run_sync_never_resumed_ends_the_paused_call_cancelled(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = approval_agent(guard, contacts)
    first = run_sync(guard, agent, "remove", trajectory_id="paused", run_config=NO_SDK_TRACING)

    assert [i.call_id for i in first.interruptions] == ["c2"] and contacts
    assert calls_by_trajectory(otel) == {"paused": [("c1", 1, "allowed"), ("c2", 2, "cancelled")]}
    assert lengths(otel) == {"paused": 2}


def test_a_guarded_run_block_of_its_own_ends_the_paused_call_cancelled(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = approval_agent(guard, contacts)
    with guarded_run(guard, "paused") as traj:
        first = Runner.run_sync(agent, "remove", run_config=NO_SDK_TRACING)

    assert first.interruptions and traj.ended
    assert calls_by_trajectory(otel) == {"paused": [("c1", 1, "allowed"), ("c2", 2, "cancelled")]}
    assert lengths(otel) == {"paused": 2}


def test_a_rejection_resumed_inside_the_same_block_ends_the_call_once(otel: Telemetry) -> None:
    # Both runs in one guarded_run block of its own: the resumed run answers the rejected
    # call without its tool, so it ends when the block (and its trajectory) ends, once.
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = approval_agent(guard, contacts)
    with guarded_run(guard, "one"):
        first = Runner.run_sync(agent, "remove", run_config=NO_SDK_TRACING)
        state = first.to_state()
        state.reject(first.interruptions[0])
        second = Runner.run_sync(agent, state, run_config=NO_SDK_TRACING)

    assert second.final_output == "Done." and contacts
    assert calls_by_trajectory(otel) == {"one": [("c1", 1, "allowed"), ("c2", 2, "cancelled")]}
    assert lengths(otel) == {"one": 2}


def test_a_paused_call_its_checks_refuse_ends_blocked(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = approval_agent(guard, contacts, contact_id="id_unseen")  # no search found it
    run_sync(guard, agent, "remove", trajectory_id="paused", run_config=NO_SDK_TRACING)

    assert calls_by_trajectory(otel) == {"paused": [("c1", 1, "allowed"), ("c2", 2, "blocked")]}


def test_the_resumed_run_counts_the_call_again_in_its_own_trajectory(otel: Telemetry) -> None:
    contacts = address_book()
    guard = otel.guard(state=contacts)
    agent = approval_agent(guard, contacts)
    first = run_sync(guard, agent, "remove", trajectory_id="paused", run_config=NO_SDK_TRACING)
    state = first.to_state()
    state.approve(first.interruptions[0])
    run_sync(guard, agent, state, trajectory_id="resumed", run_config=NO_SDK_TRACING)

    assert contacts == {}
    assert calls_by_trajectory(otel) == {
        "paused": [("c1", 1, "allowed"), ("c2", 2, "cancelled")],
        "resumed": [("c2", 1, "allowed")],
    }
    assert lengths(otel) == {"paused": 2, "resumed": 1}
