"""A guarded workload for the backend round trips: the demo's scripted agents plus the corners.

Every trajectory goes to the tracer provider it is given, so the caller decides where the spans
go (an OTLP exporter configured by ``OTEL_*`` variables, and an in-memory exporter beside it).
"""

from __future__ import annotations

import json
import random

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

import toolguard as tg
from toolguard.demo.agents import POLICIES, Task, as_model_call
from toolguard.demo.app import Phone, build_tools

EPISODES = 30
_PEOPLE = [("Alice", "+1-555-0199"), ("Bob", "+1-555-0142"), ("Carol", "+1-555-0177")]


def _achieved(phone: Phone, task: Task) -> bool:
    numbers = {c.phone for c in phone.contacts.values()}
    if task.kind == "remove":
        return task.phone not in numbers
    if task.kind == "add":
        return task.phone in numbers
    ids = {c.id for c in phone.contacts.values() if c.name == task.name}
    return any(contact_id in ids for contact_id, _ in phone.messages)


def run_workload(provider: TracerProvider, *, episodes: int = EPISODES, seed: int = 12) -> int:
    """Run the cohort; returns how many trajectories were opened."""
    rng = random.Random(seed)
    policies = list(POLICIES)
    for i in range(episodes):
        policy = policies[i % len(policies)]
        name, number = rng.choice(_PEOPLE)
        task = Task(rng.choice(["remove", "message", "add"]), name, number)
        phone = Phone(
            [p for p in _PEOPLE if task.kind != "add" or p[0] != task.name],
            cellular=policy != "ignores_settings",
        )
        # Arguments and results recorded on every other episode: gen_ai.tool.call.* too.
        guard = tg.Guard(state=phone, tracer_provider=provider, record_content=i % 2 == 0)
        build_tools(phone, guard)
        labels = {"model": "scripted", "method": policy, "task": f"{task.kind}:{task.name}"}
        with guard.trajectory(
            f"rt-{i:03d}", labels=labels, user_input=task.user_input, conversation_id=f"conv-{i}"
        ) as traj:
            _model_call(provider, i)
            POLICIES[policy](as_model_call(guard), task)
            if i % 7 != 3:  # some outcomes stay unknown
                traj.success = _achieved(phone, task)
    return episodes + _corners(provider)


def _model_call(provider: TracerProvider, i: int) -> None:
    """The model's turn as a framework traces it: a CLIENT span with token usage and a float,
    inside the trajectory (so its child), carrying no toolguard attribute."""
    tracer = provider.get_tracer("scripted-framework")
    attributes: dict[str, str | float | int] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.request.temperature": 0.25,
        "gen_ai.usage.input_tokens": 100 + i,
        "gen_ai.usage.output_tokens": 20 + i % 5,
    }
    with tracer.start_as_current_span("chat scripted", kind=SpanKind.CLIENT, attributes=attributes):
        pass


def _corners(provider: TracerProvider) -> int:
    """Log mode (several failed checks, decision logged), a tool that raises, T = 0."""
    state = {"open": False}
    guard = tg.Guard(mode="log", state=state, tracer_provider=provider)

    @guard.tool(
        preconditions=[tg.Precondition("door_open", lambda state: state["open"], "open it")],
        grounded=["code"],
    )
    def enter(code: str, floor: int) -> str:
        return f"floor {floor}"

    @guard.tool
    def explode(reason: str) -> str:
        raise RuntimeError("boom")

    with guard.trajectory("rt-log", labels={"model": "scripted", "method": "log"}) as traj:
        guard.call("enter", json.dumps({"code": "1234", "floor": 3}))
        guard.call("explode", {"reason": "test"})
        guard.call("no_such_tool", {})
        traj.success = False
    with guard.trajectory("rt-empty", labels={"model": "scripted", "method": "idle"}) as traj:
        traj.success = True
    return 2
