"""Trajectories kept by key: work per open and look-up, and the log of those the registry ends.

Work is counted (reads of a trajectory's idle time), never timed: the suite runs on shared,
noisy machines.
"""

from __future__ import annotations

import logging
from typing import Any

import toolguard as tg


class Counted(tg.Trajectory):
    """A trajectory that counts how often the registry reads its idle time."""

    reads = 0

    @property
    def last_active(self) -> float:
        Counted.reads += 1
        return self._last_active

    @last_active.setter
    def last_active(self, value: float) -> None:
        self._last_active = value


def test_an_open_or_a_look_up_visits_only_the_idle_trajectories_and_one_more(otel) -> None:
    now = [0.0]
    guard = otel.guard()
    guard.register(lambda: "pong", name="ping")
    registry = tg.TrajectoryRegistry(20_000, idle_timeout=60.0, clock=lambda: now[0])
    live = []
    for i in range(10_000):
        traj = Counted(f"t{i}", tracer=guard.tracer, registry=registry, key=f"k{i}").start()
        live.append(traj)
        now[0] += 0.001  # opened in order, 10 s in all
    Counted.reads = 0
    assert registry.get("k5000") is live[5000]
    registry.add("new", Counted("new", tracer=guard.tracer))
    assert Counted.reads <= 4  # the front entry, once per use: none of the 10,000 others
    with live[10].activate():
        guard.call("ping")  # a call is activity: t10 moves behind the others
    now[0] = 65.0  # 60 s after 5.0: t0..t4999 are idle, except t10 (called) and t5000
    Counted.reads = 0
    assert registry.get("k5001") is live[5001]
    idle = [t for i, t in enumerate(live[:5000]) if i != 10]
    assert all(t.ended for t in idle) and not any(t.ended for t in live[5000:])
    assert not live[10].ended and registry.get("k10") is live[10]
    assert Counted.reads <= len(idle) + 4  # each idle one once, then the first one in use
    assert len(registry) == 10_001 - len(idle)


def test_a_thousand_evictions_log_a_few_lines_and_write_every_summary(otel, caplog) -> None:
    now = [0.0]
    guard = otel.guard()
    guard.trajectories = tg.TrajectoryRegistry(
        10, idle_timeout=None, clock=lambda: now[0], log_interval=60.0
    )
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        for i in range(1_010):
            guard.trajectory(f"t{i}", key=f"k{i}").start()
        now[0] = 30.0
        guard.find_trajectory("k0")  # within the interval: still quiet
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and "'t0' evicted" in lines[0]
        now[0] = 61.0
        guard.find_trajectory("k0")  # the registry's next use after it: the sum
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "999 more trajectories" in lines[1] and "999 evicted" in lines[1]
    ids = [s.attributes["toolguard.trajectory.id"] for s in otel.summary_spans()]
    assert sorted(ids) == sorted(f"t{i}" for i in range(1_000))


def test_ends_after_a_quiet_interval_are_summed_up_with_their_reasons(caplog) -> None:
    now = [0.0]
    registry = tg.TrajectoryRegistry(1, idle_timeout=5.0, clock=lambda: now[0], log_interval=10)
    trajectories: list[Any] = []

    def open_one(name: str) -> None:
        trajectories.append(tg.Trajectory(name, registry=registry, key=name).start())

    with caplog.at_level(logging.WARNING, logger="toolguard"):
        open_one("a")
        open_one("b")  # evicts a: named
        now[0] = 6.0
        open_one("c")  # b expired (idle 6 s), held back
        now[0] = 12.0
        open_one("d")  # c expired; the interval has passed: one line for b and c
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "'a' evicted" in lines[0]
    assert "2 more trajectories" in lines[1] and "in the last 12 s" in lines[1]
    assert "2 expired: idle longer than idle_timeout" in lines[1]
    assert [t.ended for t in trajectories] == [True, True, True, False]
